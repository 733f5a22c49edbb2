/*
 * test-conf.c -- conf.c: defaults, every key parsed, units, and the bad
 * fixtures in tests/unit/conf/ each producing exactly the error lines of
 * its .err file. argv[1] is that directory.
 */
#include "config/conf.h"
#include "base/log.h"
#include "tap.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void check_defaults(void)
{
	struct conf_errors errs;
	struct conf *c = conf_load_string("mini.ini",
		"[backend a]\nurl = http://127.0.0.1:9000\n", &errs);

	if (!tap_ok(c != NULL, "a one-backend file loads")) {
		for (size_t i = 0; i < errs.n; i++)
			tap_diag("%s", errs.msg[i]);
		conf_errors_free(&errs);
		return;
	}
	tap_is_str(c->listen, "127.0.0.1:8080", "default listen");
	tap_is_str(c->admin_listen, "", "no admin listener by default");
	tap_is_int(c->workers, 0, "default workers = auto");
	tap_is_int(c->connect_timeout_ms, 1000, "default connect_timeout 1s");
	tap_is_int(c->response_timeout_ms, 10000, "default response_timeout 10s");
	tap_is_int(c->vnodes, 160, "default vnodes 160");
	tap_is_int(c->key, CONF_KEY_PATH_QUERY, "default key path+query");
	tap_ok(c->balance_factor == 1.25, "default balance_factor 1.25");
	tap_is_int(c->retries, 2, "default retries 2");
	tap_is_str(c->backend_header, "X-Ringproxy-Backend", "default backend header");
	tap_ok(!c->underscores_in_headers, "default underscores_in_headers off");
	tap_is_int(c->nbackends, 1, "one backend");
	tap_ok(c->backends[0].weight == 1.0, "default weight 1");
	tap_is_int(c->backends[0].port, 9000, "port from the URL");
	tap_is_str(c->backends[0].prefix, "", "no prefix");
	tap_is_str(c->health.path, "", "no active health checks by default");
	tap_ok(c->passive && !c->passive_5xx, "passive checks on, 5xx not counted by default");
	tap_ok(c->health.expect_lo == 200 && c->health.expect_hi == 399, "default expect 200-399");
	tap_is_int(c->backends[0].health.fall, 3, "default fall 3");
	conf_free(c);
	conf_errors_free(&errs);
}

static void check_full(const char *dir)
{
	char path[4096];
	struct conf_errors errs;
	struct conf *c;

	snprintf(path, sizeof(path), "%s/good-full.ini", dir);
	c = conf_load(path, &errs);
	if (!tap_ok(c != NULL, "good-full.ini loads")) {
		for (size_t i = 0; i < errs.n; i++)
			tap_diag("%s", errs.msg[i]);
		conf_errors_free(&errs);
		return;
	}
	tap_is_str(c->listen, "127.0.0.1:9090", "listen");
	tap_is_str(c->admin_listen, "127.0.0.1:9091", "admin_listen");
	tap_is_int(c->workers, 3, "workers");
	tap_is_int(c->connect_timeout_ms, 250, "250ms");
	tap_is_int(c->response_timeout_ms, 2000, "2s");
	tap_is_int(c->client_timeout_ms, 60000, "1m");
	tap_is_int(c->backend_idle_timeout_ms, 90000, "90s");
	tap_is_int(c->max_head_size, 32768, "32k");
	tap_is_int(c->buffer_size, 131072, "128k");
	tap_is_int(c->max_headers, 64, "max_headers");
	tap_is_str(c->backend_header, "X-Cache-Node", "backend_header");
	tap_ok(c->underscores_in_headers, "underscores_in_headers on");
	tap_is_int(c->log_level, LOG_DEBUG, "log_level");
	tap_is_int(c->vnodes, 100, "vnodes");
	tap_is_int(c->key, CONF_KEY_PATH_SORTED_QUERY, "key with an inline comment");
	tap_ok(c->balance_factor == 1.5, "balance_factor");
	tap_is_int(c->nbackends, 3, "three backends");
	tap_ok(c->backends[0].weight == 2.5, "fractional weight");
	tap_is_str(c->backends[1].host, "::1", "IPv6 host without brackets");
	tap_is_int(c->backends[1].port, 9002, "IPv6 port");
	tap_is_str(c->backends[1].prefix, "/thumbs", "prefix without trailing slash");
	tap_ok(c->backends[1].weight == 0, "weight 0 allowed (drained)");
	tap_is_int(c->backends[1].max_inflight, 100, "max_inflight");
	tap_is_str(c->backends[2].name, "cache_3.b", "name with . and _");
	tap_is_int(c->backends[2].port, 80, "explicit port 80");
	tap_is_str(c->health.path, "/__health", "[health] path");
	tap_is_int(c->health.interval_ms, 500, "[health] interval");
	tap_is_int(c->health.timeout_ms, 300, "[health] timeout");
	tap_is_int(c->health.rise, 1, "[health] rise");
	tap_ok(c->health.expect_lo == 200 && c->health.expect_hi == 200, "[health] expect single code");
	tap_ok(!c->passive && c->passive_5xx, "[health] booleans");
	tap_is_int(c->backoff_ms, 2000, "[health] backoff");
	tap_is_int(c->backends[0].slow_start_ms, 30000, "slow_start");
	tap_is_str(c->backends[0].health.path, "/ping", "health_path overrides");
	tap_ok(c->backends[0].health.expect_lo == 200 && c->backends[0].health.expect_hi == 204,
	       "health_expect overrides");
	tap_is_int(c->backends[0].health.fall, 5, "health_fall overrides");
	tap_is_int(c->backends[0].health.interval_ms, 500, "unset override inherits [health]");
	tap_is_str(c->backends[1].health.path, "/__health", "other backends inherit the path");
	tap_is_int(c->backends[1].health.fall, 2, "other backends inherit fall");
	tap_ok(conf_backend_find(c, "cache-1") == &c->backends[0], "find by name");
	tap_ok(conf_backend_find(c, "nope") == NULL, "find unknown name");
	conf_free(c);
	conf_errors_free(&errs);
}

static void check_units(void)
{
	uint64_t v = 0;

	tap_ok(conf_parse_duration("500ms", &v) == 0 && v == 500, "500ms");
	tap_ok(conf_parse_duration("1.5s", &v) == 0 && v == 1500, "1.5s");
	tap_ok(conf_parse_duration("2m", &v) == 0 && v == 120000, "2m");
	tap_ok(conf_parse_duration("1h", &v) == 0 && v == 3600000, "1h");
	tap_ok(conf_parse_duration("3", &v) == 0 && v == 3000, "bare number is seconds");
	tap_ok(conf_parse_duration("5 s", &v) < 0, "space before unit refused");
	tap_ok(conf_parse_duration("-1s", &v) < 0, "negative refused");
	tap_ok(conf_parse_duration("s", &v) < 0, "unit alone refused");
	tap_ok(conf_parse_duration("1m59s", &v) == 0 && v == 119000, "1m59s, as durations are printed");
	tap_ok(conf_parse_duration("1h30m", &v) == 0 && v == 5400000 &&
	       conf_parse_duration("1m59s976ms", &v) == 0 && v == 119976, "1h30m, 1m59s976ms");
	tap_ok(conf_parse_duration("59s1m", &v) < 0 && conf_parse_duration("1m1m", &v) < 0 &&
	       conf_parse_duration("1.5m30s", &v) < 0 && conf_parse_duration("1m 30s", &v) < 0,
	       "parts out of order, repeated, fractional or spaced refused");
	{
		static const struct { uint64_t ms; const char *text; } fmt[] = {
			{ 0, "0s" }, { 500, "500ms" }, { 1500, "1500ms" }, { 5000, "5s" }, { 90000, "1m30s" },
			{ 120000, "2m" }, { 119976, "1m59s976ms" }, { 3600000, "1h" }, { 5400000, "1h30m" },
			{ 3661000, "1h1m1s" }, { 86400000, "24h" },
		};
		char buf[32];
		int bad = 0;

		for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
			conf_fmt_ms(fmt[i].ms, buf, sizeof(buf));
			if (strcmp(buf, fmt[i].text) != 0 || conf_parse_duration(buf, &v) < 0 || v != fmt[i].ms) {
				tap_diag("%llu ms printed as %s, want %s", (unsigned long long)fmt[i].ms, buf, fmt[i].text);
				bad++;
			}
		}
		tap_ok(!bad, "durations print as the file writes them (2m, 1m30s, 1h30m) and read back the same");
	}
	tap_ok(conf_parse_size("64k", &v) == 0 && v == 65536, "64k");
	tap_ok(conf_parse_size("1m", &v) == 0 && v == 1048576, "1m");
	tap_ok(conf_parse_size("100", &v) == 0 && v == 100, "bytes");
	tap_ok(conf_parse_size("10q", &v) < 0, "unknown unit refused");
}

/* Load DIR/NAME.ini, expect failure with exactly the lines of NAME.err
 * (file names there are relative to DIR). */
static void check_bad(const char *dir, const char *name)
{
	char ini[4096], err[4096], *want, *line, *save = NULL;
	struct conf_errors errs;
	struct conf *c;
	size_t i = 0, plen;
	int same = 1;

	snprintf(ini, sizeof(ini), "%s/%s.ini", dir, name);
	snprintf(err, sizeof(err), "%s/%s.err", dir, name);
	want = tap_slurp(err);
	if (!tap_ok(want != NULL, "%s.err exists", name))
		return;
	c = conf_load(ini, &errs);
	tap_ok(c == NULL, "%s.ini is refused", name);
	conf_free(c);
	plen = strlen(dir) + 1;
	for (line = strtok_r(want, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
		const char *got = i < errs.n ? errs.msg[i] + plen : "(nothing)";

		if (strcmp(got, line) != 0) {
			same = 0;
			tap_diag("line %zu: got  %s", i + 1, got);
			tap_diag("line %zu: want %s", i + 1, line);
		}
	}
	for (; i < errs.n; i++) {
		same = 0;
		tap_diag("unexpected: %s", errs.msg[i] + plen);
	}
	tap_ok(same, "%s.ini: every error, exactly as in %s.err", name, name);
	conf_errors_free(&errs);
	free(want);
}

static struct conf *test_load(const char *text)
{
	struct conf_errors errs;
	struct conf *c = conf_load_string("d.ini", text, &errs);

	for (size_t i = 0; i < errs.n; i++)
		tap_diag("%s", errs.msg[i]);
	conf_errors_free(&errs);
	return c;
}

/* conf_diff: what a reload changed besides the ring, by the key table. */
static void check_diff(void)
{
	const char *be = "[backend a]\nurl = http://127.0.0.1:1\n[backend b]\nurl = http://127.0.0.1:2\n";
	char text[2048], out[1024];
	struct conf *a, *b;

	snprintf(text, sizeof(text), "[proxy]\nadmin_token = abc\n%s", be);
	a = test_load(text);
	snprintf(text, sizeof(text), "[proxy]\nlog_file = /var/log/rp.log\nadmin_token = xyz\n"
		 "[ring]\nbalance_factor = 2\nkey = path\n[health]\ninterval = 3s\n"
		 "[backend a]\nurl = http://127.0.0.1:1\nmax_inflight = 10\nhealth_fall = 5\n"
		 "[backend b]\nurl = http://127.0.0.1:9\nweight = 2\n");
	b = test_load(text);
	if (!tap_ok(a && b, "diff: two configs"))
		goto out;
	tap_is_int(conf_diff(a, a, out, sizeof(out)), 0, "diff: a config against itself: nothing");
	tap_is_str(out, "", "diff: and no text");
	tap_is_int(conf_diff(a, b, out, sizeof(out)), 7, "diff: seven settings changed");
	tap_is_str(out, "admin_token changed, log_file (empty) -> /var/log/rp.log, key path+query -> path, "
		   "balance_factor 1.25 -> 2, interval 2s -> 3s, a max_inflight 0 -> 10, a health_fall 3 -> 5",
		   "diff: each as 'key old -> new', the token's value never shown, url and weight left to the "
		   "ring's report, an inherited health interval said once");
	tap_is_int(conf_diff(a, b, out, 40), 7, "diff: a short buffer still counts them all");
	tap_ok(strlen(out) < 40, "diff: and the text is cut to it");
	tap_is_str(conf_key_mode_name(2), "path+sorted-query", "the name of a key mode");
out:
	conf_free(a);
	conf_free(b);
}

/* The SHA-256 of the bytes read, and the admin listener's rules. */
static void check_admin(void)
{
	char err[512];
	struct conf_errors errs;
	struct conf *c = test_load("[backend a]\nurl = http://127.0.0.1:1\n");

	tap_is_str(c ? c->sha256 : "", "30f6f60dc92090358e4f9f35872dbecfac77c0818086bc5dbafce66198a7e4b4", "sha256 of the config's bytes");
	conf_free(c);
	c = conf_load_string("open.ini", "[proxy]\nlisten = 127.0.0.1:0\nadmin_listen = 0.0.0.0:9000\n"
			     "[backend a]\nurl = http://127.0.0.1:1\n", &errs);
	tap_ok(c == NULL && errs.n == 1 &&
	       strcmp(errs.msg[0], "open.ini:3: admin_listen 0.0.0.0:9000 is not a loopback address and no "
		      "admin_token is set: any host that reaches it could read the stats, the ring and the "
		      "backends' addresses; set [proxy] admin_token (admin requests then need Authorization: "
		      "Bearer TOKEN) or listen on 127.0.0.1") == 0,
	       "a non-loopback admin_listen without a token is refused, at its line, saying why");
	conf_errors_free(&errs);
	c = conf_load_string("hits.ini", "[log]\naccess_hits = 1/0\n[backend a]\nurl = http://127.0.0.1:1\n", &errs);
	tap_ok(c == NULL && errs.n == 1 && strstr(errs.msg[0], "hits.ini:2: access_hits: '1/0' is not all, none or 1/N"),
	       "access_hits = 1/0 is refused at its line");
	conf_errors_free(&errs);
	{
		unsigned every = 7;
		bool ok = conf_parse_access_hits("all", &every) == 0 && every == 1 &&
			  conf_parse_access_hits("none", &every) == 0 && every == 0 &&
			  conf_parse_access_hits("1/100", &every) == 0 && every == 100 &&
			  conf_parse_access_hits("1/1000001", &every) < 0 && conf_parse_access_hits("2/10", &every) < 0 &&
			  conf_parse_access_hits("1/", &every) < 0 && conf_parse_access_hits("some", &every) < 0;

		c = test_load("[backend a]\nurl = http://127.0.0.1:1\n");
		tap_ok(ok && c && c->access_hits_every == 1, "access_hits: all, none, 1/N read; 2/10, 1/, 1/1000001 "
		       "refused; all by default");
		conf_free(c);
	}
	c = conf_load_string("tok.ini", "[proxy]\nadmin_token = a b\n[backend a]\nurl = http://127.0.0.1:1\n",
			     &errs);
	tap_ok(c == NULL && errs.n == 1 && strstr(errs.msg[0], "tok.ini:2: admin_token: a token is letters"),
	       "a token Authorization: Bearer cannot carry is refused");
	conf_errors_free(&errs);
	c = test_load("[proxy]\nadmin_listen = [::]:9000\nadmin_token = dG9rZW4=\n"
		      "[backend a]\nurl = http://127.0.0.1:1\n");
	tap_ok(c != NULL, "any admin_listen with a token (base64 padding allowed)");
	conf_free(c);
	/* a reload, against the listener that runs */
	c = conf_load_string("re.ini", "[proxy]\nadmin_listen = 127.0.0.1:0\n[backend a]\nurl = http://127.0.0.1:1\n",
			     &errs);
	conf_errors_free(&errs);
	tap_ok(c && conf_check_admin_running(c, "10.0.0.1:9091", err, sizeof(err)) == -1 &&
	       strcmp(err, "re.ini:2: no admin_token, but the admin listener running on 10.0.0.1:9091 is not a "
		      "loopback address (admin_listen changes only with a restart): keep [proxy] admin_token "
		      "set, or restart with admin_listen on 127.0.0.1") == 0,
	       "a reload without a token while a non-loopback listener runs: refused at admin_listen's line");
	tap_ok(c && conf_check_admin_running(c, "127.0.0.1:9091", err, sizeof(err)) == 0 &&
	       conf_check_admin_running(c, "", err, sizeof(err)) == 0,
	       "... a loopback listener, or none, needs no token");
	conf_free(c);
	c = test_load("[backend a]\nurl = http://127.0.0.1:1\n");
	tap_ok(c && conf_check_admin_running(c, "[::]:9091", err, sizeof(err)) == -1 &&
	       strncmp(err, "d.ini: no admin_token, but the admin listener running on [::]:9091", 65) == 0,
	       "... a file with neither key: the file named alone");
	conf_free(c);
	c = test_load("[proxy]\nadmin_token = t0k\n[backend a]\nurl = http://127.0.0.1:1\n");
	tap_ok(c && conf_check_admin_running(c, "0.0.0.0:9091", err, sizeof(err)) == 0,
	       "... with a token, any listener");
	conf_free(c);
}

/* 4,096 backends (the limit): each found by name, and a duplicate at the
 * end refused with the line of the first. */
static void check_many(void)
{
	size_t cap = 4097 * 64, n = 0;
	char *text = malloc(cap), name[32];
	struct conf_errors errs;
	struct conf *c;
	int missing = 0;

	for (int i = 0; i < 4096; i++)
		n += (size_t)snprintf(text + n, cap - n, "[backend be-%d]\nurl = http://127.0.0.1:%d\n", i,
				      1 + i % 60000);
	c = test_load(text);
	for (int i = 0; c && i < 4096; i++) {
		const struct conf_backend *b;

		snprintf(name, sizeof(name), "be-%d", i);
		b = conf_backend_find(c, name);
		missing += !b || strcmp(b->name, name) != 0 || b->line != 2 * i + 1;
	}
	tap_ok(c && missing == 0 && !conf_backend_find(c, "be-4096") && !conf_backend_find(c, "be-"),
	       "4096 backends: each found by its name, no other name found (%d wrong)", missing);
	conf_free(c);
	snprintf(text + n, cap - n, "[backend be-77]\nurl = http://127.0.0.1:9\n");
	c = conf_load_string("many.ini", text, &errs);
	tap_ok(!c && errs.n == 1 && strstr(errs.msg[0], "many.ini:8193: duplicate backend 'be-77' "
					   "(first defined at line 155)") != NULL,
	       "a duplicate of backend 77 of 4096 says where the first is: %s", errs.n ? errs.msg[0] : "");
	conf_errors_free(&errs);
	free(text);
}

/* conf_load of a file that is what a glob may match by mistake: each
 * is one error, read within bounds. */
static void check_not_config(void)
{
	char dir[] = "/tmp/test-conf-XXXXXX", path[128], line[70000];
	struct conf_errors errs;
	FILE *f;
	bool one;

	if (!mkdtemp(dir)) {
		tap_ok(0, "a temporary directory");
		return;
	}
	snprintf(path, sizeof(path), "%s/fifo.ini", dir);
	mkfifo(path, 0600);
	one = conf_load(path, &errs) == NULL && errs.n == 1 && strstr(errs.msg[0], ": is a FIFO, not a regular file");
	tap_ok(one, "a FIFO: refused at once, not waited on for a writer");
	if (!one && errs.n)
		tap_diag("%s", errs.msg[0]);
	conf_errors_free(&errs);
	unlink(path);
	tap_ok(conf_load("/dev/zero", &errs) == NULL && errs.n == 1 &&
	       strcmp(errs.msg[0], "/dev/zero: is a character device, not a regular file; a config file must be one") == 0,
	       "/dev/zero: refused, not read without end");
	conf_errors_free(&errs);
	tap_ok(conf_load(dir, &errs) == NULL && errs.n == 1 && strstr(errs.msg[0], ": is a directory, not a regular file"),
	       "a directory: refused, not read as an empty file");
	conf_errors_free(&errs);

	snprintf(path, sizeof(path), "%s/long.ini", dir);
	memset(line, 'x', sizeof(line) - 1);
	line[0] = ';';
	line[sizeof(line) - 1] = '\0';
	f = fopen(path, "w");
	fprintf(f, "[backend a]\n%s\nurl = http://127.0.0.1:1\n", line);
	fclose(f);
	one = conf_load(path, &errs) == NULL && errs.n == 1 && strstr(errs.msg[0], "long.ini:2: line longer than 65536 bytes");
	tap_ok(one, "a line over 64 KiB (a comment too): FILE:LINE, and the lines after it are read");
	if (!one && errs.n)
		tap_diag("%s", errs.msg[0]);
	conf_errors_free(&errs);
	unlink(path);

	snprintf(path, sizeof(path), "%s/big.ini", dir);
	f = fopen(path, "w");
	fprintf(f, "[backend a]\nurl = http://127.0.0.1:1\n");
	for (int i = 0; i < 300; i++)
		fprintf(f, "; %.*s\n", 60000, line + 1);
	fclose(f);
	one = conf_load(path, &errs) == NULL && errs.n == 1 &&
	      strstr(errs.msg[0], "big.ini:282: the file is larger than 16 MiB") != NULL;
	tap_ok(one, "a file over 16 MiB: one error where it passes the bound, the rest not read");
	if (!one && errs.n)
		tap_diag("%zu errors: %s", errs.n, errs.msg[0]);
	conf_errors_free(&errs);
	unlink(path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/unit/conf";
	struct conf_errors errs;

	check_defaults();
	check_many();
	check_not_config();
	check_full(dir);
	check_units();
	check_diff();
	check_admin();
	check_bad(dir, "bad-keys");
	check_bad(dir, "bad-backends");
	check_bad(dir, "bad-syntax");
	check_bad(dir, "bad-ring-size");
	check_bad(dir, "bad-drained");
	check_bad(dir, "bad-query");
	check_bad(dir, "bad-health");
	check_bad(dir, "bad-values");
	check_bad(dir, "bad-sections");
	check_bad(dir, "bad-scheme");
	check_bad(dir, "bad-scheme-nginx");
	check_bad(dir, "bad-scheme-ketama");
	check_bad(dir, "bad-scheme-envoy");
	check_bad(dir, "bad-proxyproto");
	check_bad(dir, "bad-proxyproto-from");

	tap_ok(conf_load_string("buf.ini", "[proxy]\nmax_head_size = 64k\nbuffer_size = 32k\n"
				"[backend a]\nurl = http://127.0.0.1:1\n", &errs) == NULL && errs.n == 1 &&
	       strcmp(errs.msg[0], "buf.ini:3: buffer_size (32768) is smaller than max_head_size (65536); "
		      "a head must fit in the buffer") == 0,
	       "a buffer smaller than the largest head is refused");
	conf_errors_free(&errs);
	tap_ok(conf_load_string("host.ini", "[proxy]\nlisten = localhost:8080\n"
				"[backend a]\nurl = http://127.0.0.1:1\n", &errs) == NULL && errs.n == 1 &&
	       strcmp(errs.msg[0], "host.ini:2: listen: the host must be an IP address (a listener binds "
		      "to one), e.g. 0.0.0.0:8080") == 0,
	       "a listen host name is refused by -t, not only when binding at start");
	conf_errors_free(&errs);
	tap_ok(conf_load("/nonexistent/ringproxy.ini", &errs) == NULL && errs.n == 1 &&
	       strstr(errs.msg[0], "/nonexistent/ringproxy.ini: cannot open") != NULL,
	       "a missing file is one clear error");
	conf_errors_free(&errs);
	tap_ok(conf_load_string("long.ini", "[backend a]\nurl = http://127.0.0.1:1/"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
		&errs) == NULL && errs.n >= 1 && strstr(errs.msg[0], "long.ini:2: line longer than") != NULL,
	       "a line too long for the parser is an error, not a silent cut");
	conf_errors_free(&errs);
	return tap_done();
}
