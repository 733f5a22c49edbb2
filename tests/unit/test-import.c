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
	rc = import_file(format_of(file), file, which, f, &m);
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
	int rc = import_text(format, "t.conf", text, strlen(text), which, f, &m);

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

	import_file(format_of(file), file, which, f, &m);
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
	return tap_done();
}
