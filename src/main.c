/*
 * main.c -- the command line: run the proxy (`ringproxy [-c FILE]`), check
 * a config (`-t`), plan a membership change (`plan`), print help. Runs on
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

#include "conf.h"
#include "health.h"
#include "log.h"
#include "plan.h"
#include "preflight.h"
#include "proxy.h"

#define MAIN_DEFAULT_CONF "/etc/ringproxy/ringproxy.ini"

static void main_usage(FILE *f)
{
	fprintf(f,
		"usage: ringproxy [-c FILE] [--share-listen]  run the proxy in the foreground\n"
		"       ringproxy -t [--probe] [-c FILE] check FILE and print the ring\n"
		"       ringproxy -T [-c FILE]           print FILE's effective config, defaults filled in\n"
		"       ringproxy plan OLD.ini [NEW.ini] [--keys FILE [--raw-keys] [--per-key]]\n"
		"                      [--balance-factor C] [--ramp DURATION [--period DURATION]] [--json]\n"
		"       ringproxy --help-config          every config key with default and range\n"
		"       ringproxy -V | --version         versions of ringproxy and its libraries\n"
		"\n"
		"  -c, --config FILE   config file (default " MAIN_DEFAULT_CONF ")\n"
		"  -t, --test          check the config, print backends, points and shares; exit\n"
		"      --probe         with -t: also GET each backend's health path\n"
		"  -T, --dump          check the file and print the effective config (every\n"
		"                      key, defaults filled in) as an INI file -t accepts\n"
		"      --share-listen  start even though another process listens on our\n"
		"                      addresses (a binary upgrade: start the new one beside\n"
		"                      the old, then SIGTERM the old); refused otherwise\n"
		"  -h, --help          this text\n");
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
static int main_test(const char *path, const struct conf *c, bool probe)
{
	struct preflight pf;
	int rc = 0;

	if (preflight_run(c, 0, &pf) > 0) {
		for (size_t i = 0; i < pf.warnings.n; i++)
			fprintf(stderr, "warning: %s\n", pf.warnings.msg[i]);
		main_print_errors(path, &pf.errors);
		preflight_free(&pf);
		return 1;
	}
	if (plan_print_conf(c, stdout) < 0)
		rc = 1;
	if (rc == 0 && probe) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		rc = health_probe(c, stdout);
		curl_global_cleanup();
	}
	fflush(stdout);
	for (size_t i = 0; i < pf.warnings.n; i++)
		fprintf(stderr, "warning: %s\n", pf.warnings.msg[i]);
	if (rc == 0)
		printf("\n%s: configuration ok%s\n", path,
		       pf.warnings.n == 0 ? "" : pf.warnings.n == 1 ? " (1 warning)" : " (warnings above)");
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
		{ "version", no_argument, NULL, 'V' },
		{ "share-listen", no_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = MAIN_DEFAULT_CONF;
	struct conf_errors errs;
	struct conf *c;
	int test = 0, dump = 0, probe = 0, share = 0, opt, rc;

	if (argc > 1 && strcmp(argv[1], "plan") == 0)
		return plan_main(argc - 1, argv + 1, stdout);

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
	if (dump && (test || probe || share)) {
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
	rc = proxy_run(path, c, share ? PREFLIGHT_SHARE_LISTEN : 0);
	curl_global_cleanup();
	return rc;
}
