# varnish.vcl -- a thumbnail cache behind ringproxy (Varnish 7.1), as
# tests/e2e/test_varnish.py runs it and ringproxy(7) shows it. The test
# fills in @ORIGIN_HOST@, @ORIGIN_PORT@ and @RINGPROXY@.
vcl 4.1;

# Who may PURGE: ringproxy's address only (a client's PURGE reaches the
# key's cache through ringproxy, which forwards it from this address).
acl purgers {
	"@RINGPROXY@";
}

backend origin {
	.host = "@ORIGIN_HOST@";
	.port = "@ORIGIN_PORT@";
}

sub vcl_recv {
	# ringproxy's active check ([health] path = /health): Varnish answers
	# it itself, so an origin outage does not take the caches down
	if (req.url == "/health") {
		return (synth(200, "OK"));
	}
	if (req.method == "PURGE") {
		if (!(client.ip ~ purgers)) {
			return (synth(405, "PURGE is not allowed from " + client.ip));
		}
		return (purge);
	}
}

sub vcl_hash {
	# Varnish's default, written out: URL and Host. ringproxy picks the
	# cache by the URL alone and forwards the client's Host unchanged.
	hash_data(req.url);
	if (req.http.host) {
		hash_data(req.http.host);
	} else {
		hash_data(server.ip);
	}
	return (lookup);
}
