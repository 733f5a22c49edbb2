/*
 * main.c -- the command line: run the proxy (`ringproxy [-c FILE]`), check
 * a config (`-t`), plan a membership change (`plan`), import another
 * proxy's placement (`import`), print help. Runs on
 * the main thread; the proxy itself lives in proxy.c.
 */
#include <curl/curl.h>
#include <event2/event.h>
#include <getopt.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/conf.h"
#include "backend/curlev.h"
#include "backend/health.h"
#include "config/import.h"
#include "base/log.h"
#include "admin/plan.h"
#include "backend/runstate.h"
#include "config/preflight.h"
#include "proxy.h"
#include "admin/statsdoc.h"
#include "tls/certs.h"

#define MAIN_DEFAULT_CONF "/etc/ringproxy/ringproxy.ini"

static void main_usage(FILE *f)
{
	fprintf(f,
		"usage: ringproxy [-c FILE] [--share-listen] [--pid-file FILE]\n"
		"                                        run the proxy in the foreground\n"
		"       ringproxy -t [--probe] [-c FILE] check FILE and print the ring\n"
		"       ringproxy -T [-c FILE]           print FILE's effective config, defaults filled in\n"
		"       ringproxy plan OLD.ini [NEW.ini] [--keys FILE [--raw-keys] [--per-key]]\n"
		"                      [--balance-factor C] [--ramp DURATION [--period DURATION]] [--json]\n"
		"       ringproxy import nginx|haproxy|ketama FILE [--upstream|--backend|--pool NAME]\n"
		"                      print a ringproxy.ini placing keys as that proxy does\n"
		"       ringproxy purge [-c FILE] URL...  remove URLs from the cache and the backends\n"
		"                      (POST /purge on FILE's admin listener)\n"
		"       ringproxy ctl [-c FILE] ready|drain|maint|weight NAME [DURATION|N]\n"
		"       ringproxy ctl [-c FILE] discovery apply\n"
		"                      a backend's runtime state (POST /backend on FILE's admin\n"
		"                      listener): drain leaves the ring over DURATION, keys moving\n"
		"                      warmly; maint at once; kept in [proxy] state_file\n"
		"       ringproxy --help-config          every config key with default and range\n"
		"       ringproxy --help-stats           every /metrics series and /stats key, from a\n"
		"                      sample reading (what ringproxy-stats(7) is made from)\n"
		"       ringproxy -V | --version         versions of ringproxy and its libraries\n"
		"\n"
		"  -c, --config FILE   config file (default " MAIN_DEFAULT_CONF ")\n"
		"  -t, --test          check the config, print backends, points and shares; exit\n"
		"      --probe         with -t: also GET each backend's health path\n"
		"  -T, --dump          check the file and print the effective config (every\n"
		"                      key, defaults filled in) as an INI file -t accepts\n"
		"      --share-listen  start even though a ringproxy listens on our addresses\n"
		"                      (a binary upgrade: start the new one beside the old,\n"
		"                      then SIGTERM the old); beside any other program, or\n"
		"                      without the flag, the start is refused\n"
		"      --pid-file FILE write the pid to FILE once listening, remove it at\n"
		"                      exit (instead of [proxy] pid_file)\n"
		"  -h, --help          this text\n");
}

static void main_print_errors(const char *path, const struct conf_errors *errs);

/* curl's body callback: the admin listener's answer, to stdout. */
static size_t main_collect(char *p, size_t size, size_t n, void *arg)
{
	fwrite(p, size, n, (FILE *)arg);
	return size * n;
}

/* The config of FILE for a subcommand that goes through its admin
 * listener (what: "a purge"), with the listener's base URL and the
 * Authorization header line its admin_token makes. NULL (said on stderr)
 * when the file does not load or has no admin_listen. */
static struct conf *main_admin_conf(const char *path, const char *what, char *base, size_t baselen, char *auth,
				    size_t authlen)
{
	struct conf_errors errs;
	struct conf *c = conf_load(path, &errs);

	/* nothing is started here: the file only says where the running
	 * proxy's admin listener is */
	if (!c) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msg[i]);
		if (strcmp(path, MAIN_DEFAULT_CONF) == 0)
			fprintf(stderr, "ringproxy: %s reads the admin listener from the running proxy's config, "
				"%s by default: give it with -c FILE\n", what, path);
		else
			fprintf(stderr, "ringproxy: %s: %zu error%s; %s reads the admin listener from it\n", path,
				errs.n, errs.n == 1 ? "" : "s", what);
		conf_errors_free(&errs);
		return NULL;
	}
	conf_errors_free(&errs);
	if (!*c->admin_listen) {
		fprintf(stderr, "ringproxy: %s has no [proxy] admin_listen: %s goes through it\n", path, what);
		conf_free(c);
		return NULL;
	}
	/* a listener on every address is reached on loopback */
	if (strncmp(c->admin_listen, "*:", 2) == 0 || strncmp(c->admin_listen, "0.0.0.0:", 8) == 0)
		snprintf(base, baselen, "http://127.0.0.1:%s", strrchr(c->admin_listen, ':') + 1);
	else if (strncmp(c->admin_listen, "[::]:", 5) == 0)
		snprintf(base, baselen, "http://[::1]:%s", c->admin_listen + 5);
	else
		snprintf(base, baselen, "http://%s", c->admin_listen);
	snprintf(auth, authlen, "Authorization: Bearer %s", c->admin_token);
	return c;
}

/* POST url (an empty body) with c's token, the answer's body to body;
 * curl's result, the status in *status (0: none). */
static CURLcode main_post(CURL *easy, const struct conf *c, const char *auth, const char *url, FILE *body,
			  long *status)
{
	struct curl_slist *h = *c->admin_token ? curl_slist_append(NULL, auth) : NULL;
	CURLcode cr;

	*status = 0;
	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_POST, 1L);
	curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, 0L);
	curl_easy_setopt(easy, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 30000L);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, main_collect);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, body);
	cr = curl_easy_perform(easy);
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(h);
	return cr;
}

/* -c FILE or --config FILE at argv[*i], if there: the path, else the
 * default. */
static const char *main_sub_conf(int argc, char **argv, int *i)
{
	if (*i + 1 < argc && (strcmp(argv[*i], "-c") == 0 || strcmp(argv[*i], "--config") == 0)) {
		*i += 2;
		return argv[*i - 1];
	}
	return MAIN_DEFAULT_CONF;
}

/* ringproxy purge [-c FILE] URL...: each URL through the admin listener
 * of FILE (POST /purge?url=, with its admin_token), its JSON answer on
 * stdout (each backend's status is in it). Exit 0 when the admin
 * listener answered 200 for every URL (every backend purged it or held
 * none), 1 otherwise (502: a backend kept its copy), 2 on usage. */
static int main_purge(int argc, char **argv)
{
	const char *path;
	struct conf *c;
	char base[320], url[12288], auth[600];
	int i = 1, rc = 0;

	path = main_sub_conf(argc, argv, &i);
	if (i >= argc) {
		fprintf(stderr, "usage: ringproxy purge [-c FILE] URL...\n");
		return 2;
	}
	c = main_admin_conf(path, "a purge", base, sizeof(base), auth, sizeof(auth));
	if (!c)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	for (; i < argc; i++) {
		CURL *easy = curlev_easy_new();
		char *esc = easy ? curl_easy_escape(easy, argv[i], 0) : NULL;
		long status = 0;
		CURLcode cr;

		if (!esc) {
			curl_easy_cleanup(easy);
			rc = 1;
			break;
		}
		/* the admin listener takes a target with host= too; this
		 * command takes whole URLs only, so it says so itself */
		if (strncasecmp(argv[i], "http://", 7) != 0 && strncasecmp(argv[i], "https://", 8) != 0) {
			fprintf(stderr, "ringproxy: purge %s: give the whole URL, http://HOST%s%s: the cache keys an object "
				"by its Host and target\n", argv[i], argv[i][0] == '/' ? "" : "/", argv[i]);
			curl_free(esc);
			curl_easy_cleanup(easy);
			rc = 1;
			continue;
		}
		snprintf(url, sizeof(url), "%s/purge?url=%s", base, esc);
		curl_free(esc);
		cr = main_post(easy, c, auth, url, stdout, &status);
		if (cr != CURLE_OK) {
			fprintf(stderr, "ringproxy: purge %s: %s: %s\n", argv[i], base, curl_easy_strerror(cr));
			rc = 1;
		} else if (status == 502) {
			fprintf(stderr, "ringproxy: purge %s: a backend kept its copy (refused, or no answer): "
				"see \"backends\" in the JSON\n", argv[i]);
			rc = 1;
		} else if (status != 200) {
			fprintf(stderr, "ringproxy: purge %s: the admin listener answered %ld\n", argv[i], status);
			rc = 1;
		}
		curl_easy_cleanup(easy);
	}
	fflush(stdout);
	curl_global_cleanup();
	conf_free(c);
	return rc;
}

/* Did the proxy's answer to a ctl (body, its JSON) say the change was not
 * written to the state file? Its "state_file" is "saved", "off" (no state
 * file) or the error, which goes into why. A body without the field (an
 * older proxy) says nothing: false. */
static bool main_ctl_unsaved(const char *body, char *why, size_t len)
{
	static const char key[] = "\"state_file\": \"";
	const char *v = body ? strstr(body, key) : NULL;
	size_t n = 0;

	if (!v)
		return false;
	v += sizeof(key) - 1;
	while (v[n] && v[n] != '"')
		n += v[n] == '\\' && v[n + 1] ? 2 : 1;
	if ((n == 5 && strncmp(v, "saved", 5) == 0) || (n == 3 && strncmp(v, "off", 3) == 0))
		return false;
	snprintf(why, len, "%.*s", (int)n, v);
	return true;
}

/* ringproxy ctl [-c FILE] ready|drain|maint|weight NAME [ARG]: a
 * backend's runtime state through FILE's admin listener (POST /backend,
 * with its admin_token). The answer's JSON on stdout when it was taken
 * (exit 0, or 3 when the state file could not be written: the change
 * holds until a restart); a refusal's on stderr, with what is valid
 * (exit 1); 2 on usage. */
static int main_ctl(int argc, char **argv)
{
	static const char usage[] = "usage: ringproxy ctl [-c FILE] ready NAME | drain NAME [DURATION] | maint NAME | "
				    "weight NAME N | discovery apply\n";
	const char *path, *verb, *name, *arg;
	struct conf *c;
	char base[320], url[1600], auth[600], why[600], *body = NULL, *ev = NULL, *en = NULL, *ea = NULL;
	size_t bodylen = 0;
	FILE *f = NULL;
	CURL *easy = NULL;
	long status = 0;
	CURLcode cr;
	int i = 1, rc = 1;

	path = main_sub_conf(argc, argv, &i);
	if (argc - i < 2 || argc - i > 3) {
		fputs(usage, stderr);
		return 2;
	}
	verb = argv[i];
	name = argv[i + 1];
	arg = argc - i == 3 ? argv[i + 2] : NULL;
	c = main_admin_conf(path, "ctl", base, sizeof(base), auth, sizeof(auth));
	if (!c)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	easy = curlev_easy_new();
	f = open_memstream(&body, &bodylen);
	ev = easy ? curl_easy_escape(easy, verb, 0) : NULL;
	en = easy ? curl_easy_escape(easy, name, 0) : NULL;
	ea = easy ? curl_easy_escape(easy, arg ? arg : "", 0) : NULL;
	if (!f || !ev || !en || !ea) {
		fprintf(stderr, "ringproxy: out of memory\n");
		goto out;
	}
	if (strcmp(verb, "discovery") == 0)
		snprintf(url, sizeof(url), "%s/discovery?action=%s", base, en);
	else if (strcmp(verb, "weight") == 0)
		snprintf(url, sizeof(url), "%s/backend?name=%s&weight=%s", base, en, ea);
	else
		snprintf(url, sizeof(url), "%s/backend?name=%s&state=%s%s%s", base, en, ev,
			 arg ? "&duration=" : "", arg ? ea : "");
	cr = main_post(easy, c, auth, url, f, &status);
	fclose(f);
	f = NULL;
	if (cr != CURLE_OK)
		fprintf(stderr, "ringproxy: ctl %s %s: %s: %s\n", verb, name, base, curl_easy_strerror(cr));
	else if (status != 200)
		fprintf(stderr, "ringproxy: ctl %s %s: refused (%ld): %s", verb, name, status, body ? body : "\n");
	else
		fputs(body ? body : "", stdout);
	rc = cr == CURLE_OK && status == 200 ? 0 : 1;
	if (rc == 0 && main_ctl_unsaved(body, why, sizeof(why))) {
		fprintf(stderr, "ringproxy: ctl %s %s: done, but not saved in the state file (%s); it holds until a "
			"restart\n", verb, name, why);
		rc = 3;
	}
out:
	if (f)
		fclose(f);
	free(body);
	curl_free(ev);
	curl_free(en);
	curl_free(ea);
	curl_easy_cleanup(easy);
	fflush(stdout);
	curl_global_cleanup();
	conf_free(c);
	return rc;
}

/* One library's line of --version: the version it runs with, and the one
 * it was built against when they differ (a library upgraded under the
 * binary shows here). prefix goes before the version ("" when the
 * library's own text names it). */
static void main_version_line(FILE *f, const char *prefix, const char *runtime, const char *built)
{
	fprintf(f, "%s%s", prefix, runtime);
	if (strcmp(runtime, built) != 0)
		fprintf(f, " (built with %s)", built);
	fputc('\n', f);
}

/* ringproxy -V: its version and its libraries'. inih has no runtime
 * version call: its line is the version pkg-config gave the build. */
static void main_version(FILE *f)
{
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);

	fprintf(f, "ringproxy %s\n", RINGPROXY_VERSION);
	main_version_line(f, "libevent ", event_get_version(), LIBEVENT_VERSION);
	main_version_line(f, "", OpenSSL_version(OPENSSL_VERSION), OPENSSL_VERSION_TEXT);
	main_version_line(f, "libcurl ", cv->version, LIBCURL_VERSION);
	fprintf(f, "inih %s (as built: inih has no runtime version call)\n", RINGPROXY_INIH_VERSION);
}

/* Print every error of a failed load, then a summary line. */
static void main_print_errors(const char *path, const struct conf_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(stderr, "%s\n", errs->msg[i]);
	fprintf(stderr, "ringproxy: %s: %zu error%s; nothing started\n", path, errs->n,
		errs->n == 1 ? "" : "s");
}

/* ringproxy -t [--probe]: the file, then this host (preflight.c), then
 * the ring; with --probe every backend's health path. Warnings are
 * printed and change nothing. Exit status 0 or 1. */
static unsigned main_cert_warnings;

static void main_cert_warn(const char *line)
{
	fprintf(stderr, "warning: %s\n", line);
	main_cert_warnings++;
}

/* [tls]: every certificate loaded and checked as a start would (key,
 * expiry, names), the cipher lists against the weak ones. 0, or -1 with
 * the reasons printed. */
static int main_test_tls(const char *path, const struct conf *c)
{
	char err[4096];
	struct certs *s = certs_new(c, main_cert_warn, err, sizeof(err));
	size_t n = 1;

	if (s || !err[0]) {
		certs_unref(s);
		return 0;
	}
	for (const char *p = err; (p = strchr(p, '\n')); p++)
		n++;
	fprintf(stderr, "%s\n", err);
	fprintf(stderr, "ringproxy: %s: %zu error%s; nothing started\n", path, n, n == 1 ? "" : "s");
	return -1;
}

static int main_test(const char *path, const struct conf *c, bool probe)
{
	struct preflight pf;
	char err[1024];
	int rc = 0;

	/* the state file the start would read, checked as it reads it */
	if (*c->state_file && runstate_check(c->state_file, c, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\nringproxy: %s: the state file is refused; nothing started\n", err, path);
		return 1;
	}
	if (main_test_tls(path, c) < 0)
		return 1;
	if (preflight_run(c, 0, &pf) > 0) {
		for (size_t i = 0; i < pf.warnings.n; i++)
			fprintf(stderr, "warning: %s\n", pf.warnings.msg[i]);
		main_print_errors(path, &pf.errors);
		preflight_free(&pf);
		return 1;
	}
	if (plan_print_conf(c, stdout) < 0)
		rc = 1;
	if (*c->disc_srv)
		printf("\n%s: and the backends DNS names in [discovery] srv (%s), found when ringproxy runs\n", path,
		       c->disc_srv);
	if (rc == 0 && probe) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		rc = health_probe(c, NULL, stdout);
		curl_global_cleanup();
	}
	fflush(stdout);
	for (size_t i = 0; i < pf.warnings.n; i++)
		fprintf(stderr, "warning: %s\n", pf.warnings.msg[i]);
	if (rc == 0)
		printf("\n%s: configuration ok%s\n", path,
		       pf.warnings.n + main_cert_warnings == 0 ? "" :
		       pf.warnings.n + main_cert_warnings == 1 ? " (1 warning)" : " (warnings above)");
	else if (probe)
		printf("\n%s: configuration ok, but a backend failed its probe\n", path);
	preflight_free(&pf);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "dump", no_argument, NULL, 'T' },
		{ "probe", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "help-config", optional_argument, NULL, 'H' },
		{ "help-stats", no_argument, NULL, 'S' },
		{ "version", no_argument, NULL, 'V' },
		{ "share-listen", no_argument, NULL, 's' },
		{ "pid-file", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = MAIN_DEFAULT_CONF, *pid_file = NULL;
	struct conf_errors errs;
	struct conf *c;
	int test = 0, dump = 0, probe = 0, share = 0, opt, rc;

	log_route_libevent();
	if (argc > 1 && strcmp(argv[1], "plan") == 0)
		return plan_main(argc - 1, argv + 1, stdout);
	if (argc > 1 && strcmp(argv[1], "import") == 0)
		return import_main(argc - 1, argv + 1, stdout);
	if (argc > 1 && strcmp(argv[1], "purge") == 0)
		return main_purge(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "ctl") == 0)
		return main_ctl(argc - 1, argv + 1);

	while ((opt = getopt_long(argc, argv, "c:tThV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test = 1;
			break;
		case 'T':
			dump = 1;
			break;
		case 'p':
			probe = 1;
			break;
		case 's':
			share = 1;
			break;
		case 'P':
			if (!*optarg) {
				fprintf(stderr, "ringproxy: --pid-file needs a file name\n");
				return 2;
			}
			pid_file = optarg;
			break;
		case 'h':
			main_usage(stdout);
			return 0;
		case 'H':
			/* =scdoc: the key list of the man page */
			if (optarg && strcmp(optarg, "scdoc") == 0) {
				conf_help_scdoc(stdout);
			} else if (optarg) {
				fprintf(stderr, "ringproxy: --help-config takes no value or =scdoc\n");
				return 2;
			} else {
				conf_help(stdout);
			}
			return 0;
		case 'S':
			return statsdoc_print(stdout) < 0 ? 1 : 0;
		case 'V':
			main_version(stdout);
			return 0;
		default:
			main_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ringproxy: unexpected argument '%s'\n", argv[optind]);
		main_usage(stderr);
		return 2;
	}
	if (dump && (test || probe || share || pid_file)) {
		fprintf(stderr, "ringproxy: -T goes alone (with -c)\n");
		return 2;
	}
	if (probe && !test) {
		fprintf(stderr, "ringproxy: --probe goes with -t\n");
		return 2;
	}

	c = conf_load(path, &errs);
	if (!c) {
		main_print_errors(path, &errs);
		conf_errors_free(&errs);
		return 1;
	}
	conf_errors_free(&errs);

	if (dump) {
		rc = conf_write(c, stdout) < 0 || fflush(stdout) != 0 ? 1 : 0;
		conf_free(c);
		return rc;
	}
	if (test) {
		rc = main_test(path, c, probe);
		conf_free(c);
		return rc;
	}
	log_set_level((enum log_level)c->log_level);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = proxy_run(path, c, share ? PREFLIGHT_SHARE_LISTEN : 0, pid_file);
	curl_global_cleanup();
	return rc;
}
