/*
 * test-import.c -- import.c: operator-style configs of NGINX, HAProxy and
 * nutcracker in tests/unit/import/ (argv[1]), each imported exactly to
 * its .ini, and the files import refuses, each with exactly the lines of
 * its .err (warnings too: a .err beside a .ini). FILE[.WHICH].ini and
 * FILE[.WHICH].err are the expectations of FILE imported with WHICH as
 * --upstream, --backend or --pool. Then the small rules one by one.
 */
#include "config/conf.h"
#include "config/import.h"
#include "tap.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int format_of(const char *file)
{
	const char *dot = strrchr(file, '.');

	return strcmp(dot, ".conf") == 0 ? IMPORT_NGINX : strcmp(dot, ".cfg") == 0 ? IMPORT_HAPROXY : IMPORT_KETAMA;
}

/* The messages of m, one a line. Caller frees. */
static char *joined(const struct import_msgs *m)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);

	for (size_t i = 0; i < m->n; i++)
		fprintf(f, "%s\n", m->msg[i]);
	fclose(f);
	return s;
}

/* Lines that differ, for a failed comparison. */
static void show_diff(const char *got, const char *want)
{
	for (int line = 1; *got || *want; line++) {
		size_t g = strcspn(got, "\n"), w = strcspn(want, "\n");

		if (g != w || memcmp(got, want, g) != 0) {
			tap_diag("  line %d: got  '%.*s'", line, (int)g, got);
			tap_diag("  line %d: want '%.*s'", line, (int)w, want);
			return;
		}
		got += g + (got[g] == '\n');
		want += w + (want[w] == '\n');
	}
}

/* Import file (with which), and compare with its .ini and .err. */
static void check_file(const char *file, const char *which)
{
	char ini_path[256], err_path[256], *ini, *err, *out = NULL, *msgs;
	size_t outlen = 0;
	struct import_msgs m;
	FILE *f = open_memstream(&out, &outlen);
	int rc;

	snprintf(ini_path, sizeof(ini_path), "%s%s%s.ini", file, which ? "." : "", which ? which : "");
	snprintf(err_path, sizeof(err_path), "%s%s%s.err", file, which ? "." : "", which ? which : "");
	ini = tap_slurp(ini_path);
	err = tap_slurp(err_path);
	rc = import_file(format_of(file), file, &(struct import_opts){ which, NULL }, f, &m);
	fclose(f);
	msgs = joined(&m);
	if (ini) {
		tap_is_int(rc, 0, "%s%s%s imports", file, which ? " " : "", which ? which : "");
		if (!tap_ok(strcmp(out, ini) == 0, "%s: the INI is exactly %s", file, ini_path))
			show_diff(out, ini);
	} else {
		tap_is_int(rc, -1, "%s%s%s is refused", file, which ? " " : "", which ? which : "");
		tap_ok(outlen == 0, "%s: nothing written", file);
	}
	if (!tap_ok(strcmp(msgs, err ? err : "") == 0, "%s: the messages are exactly %s", file,
		    err ? err_path : "none"))
		show_diff(msgs, err ? err : "");
	if (ini && !err)
		tap_is_int(m.nerr, 0, "%s: no error", file);
	import_msgs_free(&m);
	free(msgs);
	free(out);
	free(ini);
	free(err);
}

/* text imported as format: the INI (caller frees), or NULL with the
 * messages in *msgs (caller frees). */
static char *import_string(int format, const char *text, const char *which, char **msgs)
{
	char *out = NULL;
	size_t len = 0;
	struct import_msgs m;
	FILE *f = open_memstream(&out, &len);
	int rc = import_text(format, "t.conf", text, strlen(text), &(struct import_opts){ which, NULL }, f, &m);

	fclose(f);
	*msgs = joined(&m);
	import_msgs_free(&m);
	if (rc < 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* The INI loads as a config, without a single error. */
static void check_loads(const char *file, const char *which)
{
	char *out = NULL;
	size_t len = 0;
	struct import_msgs m;
	struct conf_errors errs;
	FILE *f = open_memstream(&out, &len);
	struct conf *c;

	import_file(format_of(file), file, &(struct import_opts){ which, NULL }, f, &m);
	fclose(f);
	import_msgs_free(&m);
	c = conf_load_string(file, out, &errs);
	for (size_t i = 0; i < errs.n; i++)
		tap_diag("  %s", errs.msg[i]);
	tap_ok(c && errs.n == 0, "%s: the INI loads with no error", file);
	conf_free(c);
	conf_errors_free(&errs);
	free(out);
}

/* Names from addresses: conf.c's alphabet, unique. */
static void check_names(void)
{
	char *msgs, *ini = import_string(IMPORT_NGINX,
		"upstream u { hash $request_uri consistent;\n"
		" server 10.0.0.1:80; server 10.0.0.1-80; server [::1]:8080;\n"
		" server a_very_long_host_name_of_an_operator_who_likes_long_names.thumbs.example:6081; }\n",
		NULL, &msgs);

	if (!tap_ok(ini != NULL, "four servers import")) {
		tap_diag("%s", msgs);
	} else {
		tap_ok(strstr(ini, "[backend 10.0.0.1-80]\nurl = http://10.0.0.1:80\nweight = 1\nid = 10.0.0.1:80\n") != NULL,
		       "10.0.0.1:80 is [backend 10.0.0.1-80], port 80 written out, id as written");
		tap_ok(strstr(ini, "[backend 10.0.0.1-80-2]\nurl = http://10.0.0.1-80:80\nweight = 1\nid = 10.0.0.1-80\n") != NULL,
		       "a name already taken gets -2; a server without a port gets port 80, its id stays as written");
		tap_ok(strstr(ini, "[backend 1-8080]\nurl = http://[::1]:8080\n") != NULL,
		       "[::1]:8080 is [backend 1-8080], url with brackets");
		tap_ok(strstr(ini, "[backend a_very_long_host_name_of_an_operator_who_likes_long_names.]\n") != NULL,
		       "a long name is cut to 58 characters (room for a -N suffix within 64)");
	}
	free(ini);
	free(msgs);
}

/* The nginx grammar: comments, quotes, escapes, blocks around. */
static void check_nginx_grammar(void)
{
	char *msgs, *ini = import_string(IMPORT_NGINX,
		"# a comment with { and }\n"
		"http { map $uri $x { default 1; }\n"
		"  log_format f '{\"a\": \"$uri\"}';  include conf.d/*.conf;\n"
		"  log_format g a\\;b\\{c;\n"
		"  upstream \"u\" {\n"
		"    hash   \"$request_uri\"   consistent ; # trailing } comment\n"
		"    server 'h1:81' weight=2\n"
		"           max_fails=1;\n"
		"    server h2:82;\n"
		"  }\n"
		"  server { location / { proxy_pass http://u; } }\n"
		"}\n", NULL, &msgs);

	if (!tap_ok(ini != NULL, "nested blocks, quotes, comments with braces")) {
		tap_diag("%s", msgs);
	} else {
		tap_ok(strstr(ini, "; t.conf:7: server h1:81 weight=2 max_fails=1\n[backend h1-81]\n"
			      "url = http://h1:81\nweight = 2\nid = h1:81\n") != NULL,
		       "a directive over two lines, a quoted address, the line of its first word");
		tap_ok(strstr(ini, "id = h2:82\n") != NULL, "a backslash keeps ';' and '{' inside a word");
		tap_ok(strstr(ini, "upstream u of\n; t.conf (line 5)") != NULL, "the upstream's line");
	}
	free(ini);
	free(msgs);
}

/* text imported as nginx from stdin ("-"), with options. */
static char *import_stdin(const char *text, const struct import_opts *o, int format, char **msgs)
{
	char *out = NULL;
	size_t len = 0;
	struct import_msgs m;
	FILE *f = open_memstream(&out, &len);
	int rc = import_text(format, "-", text, strlen(text), o, f, &m);

	fclose(f);
	*msgs = joined(&m);
	import_msgs_free(&m);
	if (rc < 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* `nginx -T | ringproxy import nginx -`: the files of the dump followed
 * as the includes name them, in place (the server inherits http's
 * proxy_set_header), each message and comment at its own file's line. */
static void check_nginx_dump(void)
{
	static const char dump[] =
		"nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
		"nginx: configuration file /etc/nginx/nginx.conf test is successful\n"
		"# configuration file /etc/nginx/nginx.conf:\n"
		"user www-data;\n"
		"http {\n"
		"\tproxy_set_header Host cache.example;\n"
		"\tinclude /etc/nginx/conf.d/*.conf;\n"
		"\tinclude sites-enabled/*;\n"
		"}\n"
		"\n"
		"# configuration file /etc/nginx/conf.d/thumbs.conf:\n"
		"upstream thumbs {\n"
		"\thash $request_uri consistent;\n"
		"\tserver 10.0.0.11:6081;\n"
		"\tserver 10.0.0.12:6081;\n"
		"}\n"
		"\n"
		"# configuration file /etc/nginx/sites-enabled/default:\n"
		"server {\n"
		"\tlisten 8080;\n"
		"\tlocation / { proxy_pass http://thumbs; }\n"
		"}\n";
	char *msgs, *ini = import_stdin(dump, NULL, IMPORT_NGINX, &msgs);

	if (!tap_ok(ini != NULL, "nginx -T's output on stdin imports")) {
		tap_diag("%s", msgs);
	} else {
		tap_ok(strstr(ini, "; /etc/nginx/conf.d/thumbs.conf:4: server 10.0.0.12:6081\n[backend 10.0.0.12-6081]\n") != NULL,
		       "dump: a server's comment names its own file and line");
		tap_ok(strstr(ini, "\nlisten = 0.0.0.0:8080\n") != NULL && strstr(ini, "(/etc/nginx/sites-enabled/default:2: listen 8080)") != NULL,
		       "dump: the listen of the server that proxies to the upstream, from a file the glob matched");
		tap_ok(strstr(ini, "\nbackend_host = cache.example\n") != NULL &&
		       strstr(ini, "/etc/nginx/nginx.conf:3).") != NULL,
		       "dump: http's proxy_set_header Host reaches the server included inside it");
		tap_is_str(msgs, "", "dump: the nginx: lines before the first file are not config; no message");
	}
	free(ini);
	free(msgs);
	ini = import_stdin("upstream u { hash $request_uri consistent; server 10.0.0.1:80; }\ninclude x.conf;\n",
			   NULL, IMPORT_NGINX, &msgs);
	tap_ok(ini != NULL && strstr(msgs, "-:2: warning: include x.conf is not followed: stdin is not nginx -T's output") != NULL,
	       "stdin without nginx -T's file lines: an include is not followed, with a warning");
	free(ini);
	free(msgs);
	ini = import_stdin("# configuration file /etc/nginx/nginx.conf:\ninclude /etc/nginx/up.conf;\n",
			   NULL, IMPORT_NGINX, &msgs);
	tap_ok(ini == NULL && strstr(msgs, "/etc/nginx/nginx.conf:1: include /etc/nginx/up.conf: /etc/nginx/up.conf is not in nginx -T's output") != NULL,
	       "dump: an include of a file the dump lacks is an error at its line");
	free(ini);
	free(msgs);
}

/* An include of a FIFO or a directory is refused at once, not read (a
 * FIFO would block the import for good). */
static void check_nginx_include_kinds(void)
{
	char dir[] = "/tmp/test-import-XXXXXX", fifo[64], text[256], *msgs, *ini;

	if (!tap_ok(mkdtemp(dir) != NULL, "a temporary directory"))
		return;
	snprintf(fifo, sizeof(fifo), "%s/fifo.conf", dir);
	tap_ok(mkfifo(fifo, 0600) == 0, "a FIFO in it");
	for (int k = 0; k < 2; k++) {
		snprintf(text, sizeof(text), "upstream u { hash $request_uri consistent; server 10.0.0.1:80; }\n"
			 "include %s;\n", k ? dir : fifo);
		ini = import_string(IMPORT_NGINX, text, NULL, &msgs);
		tap_ok(ini == NULL && strstr(msgs, "t.conf:2: include /tmp/test-import-") &&
		       strstr(msgs, ": not a regular file"), "include of a %s: refused at its line, at once",
		       k ? "directory" : "FIFO");
		free(ini);
		free(msgs);
	}
	unlink(fifo);
	rmdir(dir);
}

/* The Host NGINX sent the caches, as [proxy] backend_host. */
static void check_nginx_host(void)
{
	static const struct {
		const char *front, *host, *what;
	} cases[] = {
		{ "server { location / { proxy_pass http://thumbs; } }", "thumbs",
		  "no proxy_set_header Host: the upstream's name ($proxy_host)" },
		{ "server { location / { proxy_pass http://thumbs/; proxy_set_header Host img.example; } }", "img.example",
		  "proxy_set_header Host with a name: that name" },
		{ "proxy_set_header Host $http_host; server { location / { proxy_set_header X-A 1; proxy_pass http://thumbs; } }",
		  "thumbs", "a location's own proxy_set_header list replaces http's Host: $proxy_host again" },
		{ "server { proxy_set_header Host $http_host; location / { proxy_pass http://thumbs; } }", NULL,
		  "$http_host: the client's Host, no backend_host" },
		{ "server { location / { proxy_pass http://thumbs; } proxy_set_header Host $host; }", NULL,
		  "$host, set after the location in its server: applies, no backend_host" },
		{ "server { location / { proxy_pass http://thumbs; proxy_set_header Host $host:$server_port; } }", NULL,
		  "a Host of variables ringproxy cannot make: none, and a warning" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[512], *msgs, *ini, want[128];

		snprintf(text, sizeof(text), "http { upstream thumbs { hash $request_uri consistent; server 10.0.0.1:80; }\n%s }\n",
			 cases[i].front);
		ini = import_string(IMPORT_NGINX, text, NULL, &msgs);
		snprintf(want, sizeof(want), "\nbackend_host = %s\n", cases[i].host ? cases[i].host : "");
		if (!tap_ok(ini && (cases[i].host ? strstr(ini, want) != NULL : strstr(ini, "backend_host =") == NULL),
			    "nginx Host: %s", cases[i].what))
			tap_diag("%s%s", ini ? ini : "", msgs);
		if (i == 5)
			tap_ok(strstr(msgs, "warning: proxy_set_header Host $host:$server_port is not reproduced") != NULL,
			       "nginx Host: the warning names the value");
		free(ini);
		free(msgs);
	}
}

/* HAProxy: http-request set-header Host, option httpchk. */
static void check_haproxy_front(void)
{
	char *msgs, *ini = import_string(IMPORT_HAPROXY,
		"backend thumbs\n mode http\n balance uri\n hash-type consistent\n"
		" http-request set-header Host thumbs.internal\n option httpchk HEAD /ping HTTP/1.1\n"
		" server a 10.0.0.1:80\n", NULL, &msgs);

	tap_ok(ini && strstr(ini, "\nbackend_host = thumbs.internal\n") && strstr(ini, "\npath = /ping\n"),
	       "haproxy: http-request set-header Host is backend_host, option httpchk's uri the health path");
	free(ini);
	free(msgs);
	ini = import_string(IMPORT_HAPROXY,
		"backend thumbs\n mode http\n balance uri\n hash-type consistent\n"
		" http-request set-header Host %[req.hdr(host)]\n server a 10.0.0.1:80\n", NULL, &msgs);
	tap_ok(ini && !strstr(ini, "backend_host =") &&
	       strstr(msgs, "t.conf:5: warning: http-request set-header Host %[req.hdr(host)] is not reproduced"),
	       "haproxy: a Host made by an expression is not written, with a warning at its line");
	free(ini);
	free(msgs);
}

/* --names: a pattern and each server's place; bad patterns refused. */
static void check_names_pattern(void)
{
	struct import_opts o = { NULL, "thumbs-%d" };
	char *msgs, *ini = import_stdin("upstream u { hash $request_uri consistent;\n server 10.0.0.1:80;\n"
					" server 10.0.0.2:80;\n server 10.0.0.3:80; }\n", &o, IMPORT_NGINX, &msgs);

	tap_ok(ini && strstr(ini, "; -:3: server 10.0.0.2:80\n[backend thumbs-2]\nurl = http://10.0.0.2:80\n") &&
	       strstr(ini, "[backend thumbs-1]") && strstr(ini, "[backend thumbs-3]"),
	       "--names thumbs-%%d: thumbs-1, -2, -3 in the source's order, each with its source line");
	free(ini);
	free(msgs);
	tap_ok(import_names_ok("thumbs-%d") && import_names_ok("%d.cache") && !import_names_ok("thumbs") &&
	       !import_names_ok("a-%d-%d") && !import_names_ok("a %d") && !import_names_ok("a-%s") &&
	       !import_names_ok("x%%d"), "--names: one %%d and name characters only");
}

/* 4,096 HAProxy servers called s (issue: naming was cubic, about a
 * minute): s, s-2, ..., s-4096, and a server called s-2 written first
 * keeps its name. The suite's timeout bounds the time. */
static void check_names_many(void)
{
	size_t cap = 4200 * 48, len = 0;
	char *text = malloc(cap), *msgs, *ini;
	bool ok;

	len += (size_t)snprintf(text + len, cap - len, "backend b\n mode http\n balance uri\n hash-type consistent\n"
				" server s-2 10.1.0.1:80\n");
	for (int i = 1; i < 4096; i++)
		len += (size_t)snprintf(text + len, cap - len, " server s 10.%d.%d.%d:80\n", 2 + i / 65536,
					i / 256 % 256, i % 256);
	ini = import_string(IMPORT_HAPROXY, text, NULL, &msgs);
	ok = ini && strstr(ini, "[backend s-2]\nurl = http://10.1.0.1:80\nweight = 1\nid = 1\n") &&
	     strstr(ini, "[backend s]\nurl = http://10.2.0.1:80\nweight = 1\nid = 2\n") &&
	     strstr(ini, "[backend s-3]\nurl = http://10.2.0.2:80\n") &&
	     strstr(ini, "[backend s-4096]\nurl = http://10.2.15.255:80\nweight = 1\nid = 4096\n") &&
	     !strstr(ini, "[backend s-2-2]") && !strstr(ini, "[backend s-4097]");
	if (!tap_ok(ok, "4,096 servers called s: s, s-3 ... s-4096 (s-2 was taken first), ids 1 to 4096"))
		tap_diag("%.300s", ini ? ini : msgs);
	free(ini);
	free(msgs);
	free(text);
}

int main(int argc, char **argv)
{
	static const struct { const char *file, *which; } files[] = {
		{ "nginx.conf", NULL },
		{ "nginx-uri.conf", "b" },
		{ "nginx-uri.conf", NULL },
		{ "nginx-uri.conf", "c" },
		{ "bad-nginx-upstream.conf", NULL },
		{ "bad-nginx-key.conf", NULL },
		{ "bad-nginx-rr.conf", NULL },
		{ "bad-nginx-syntax.conf", NULL },
		{ "bad-nginx-brace.conf", NULL },
		{ "haproxy.cfg", "thumbs" },
		{ "haproxy.cfg", NULL },
		{ "haproxy.cfg", "static-2" },
		{ "haproxy-ids.cfg", NULL },
		{ "bad-haproxy-balance.cfg", "thumbs" },
		{ "bad-haproxy-balance.cfg", "other" },
		{ "bad-haproxy-balance.cfg", "third" },
		{ "bad-haproxy-servers.cfg", NULL },
		{ "bad-haproxy-tcp.cfg", NULL },
		{ "nutcracker.yml", "thumbs" },
		{ "nutcracker.yml", "sessions" },
		{ "nutcracker.yml", NULL },
		{ "nutcracker.yml", "memcached" },
		{ "bad-nutcracker.yml", NULL },
		{ "missing.conf", NULL },
		{ "inc/nginx.conf", NULL },
		{ "inc/loop.conf", NULL },
		{ "bad-nginx-include.conf", NULL },
	};

	if (argc < 2 || chdir(argv[1]) != 0) {
		fprintf(stderr, "usage: test-import DIR (tests/unit/import)\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		check_file(files[i].file, files[i].which);
	check_loads("nginx.conf", NULL);
	check_loads("haproxy.cfg", "thumbs");
	check_loads("haproxy-ids.cfg", NULL);
	check_loads("nutcracker.yml", "thumbs");
	check_loads("nutcracker.yml", "sessions");
	check_loads("nginx-uri.conf", "b");
	check_names();
	check_nginx_grammar();
	check_nginx_dump();
	check_nginx_include_kinds();
	check_nginx_host();
	check_haproxy_front();
	check_names_pattern();
	check_names_many();
	return tap_done();
}
