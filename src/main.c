/*
 * main.c -- the command line: run the proxy (`ringproxy [-c FILE]`), check
 * a config (`-t`), plan a membership change (`plan`), print help. Runs on
 * the main thread; the proxy itself lives in proxy.c.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "health.h"
#include "log.h"
#include "plan.h"
#include "proxy.h"

#define MAIN_DEFAULT_CONF "/etc/ringproxy/ringproxy.ini"

static void main_usage(FILE *f)
{
	fprintf(f,
		"usage: ringproxy [-c FILE]              run the proxy in the foreground\n"
		"       ringproxy -t [--probe] [-c FILE] check FILE and print the ring\n"
		"       ringproxy plan OLD.ini [NEW.ini] [--keys FILE [--raw-keys] [--per-key]]\n"
		"                      [--balance-factor C] [--json]\n"
		"       ringproxy --help-config          every config key with default and range\n"
		"       ringproxy --version\n"
		"\n"
		"  -c, --config FILE   config file (default " MAIN_DEFAULT_CONF ")\n"
		"  -t, --test          check the config, print backends, points and shares; exit\n"
		"      --probe         with -t: also GET each backend's health path\n"
		"  -h, --help          this text\n");
}

/* Print every error of a failed load, then a summary line. */
static void main_print_errors(const char *path, const struct conf_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(stderr, "%s\n", errs->msg[i]);
	fprintf(stderr, "ringproxy: %s: %zu error%s; nothing started\n", path, errs->n,
		errs->n == 1 ? "" : "s");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "probe", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "help-config", no_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = MAIN_DEFAULT_CONF;
	struct conf_errors errs;
	struct conf *c;
	int test = 0, probe = 0, opt, rc;

	if (argc > 1 && strcmp(argv[1], "plan") == 0)
		return plan_main(argc - 1, argv + 1, stdout);

	while ((opt = getopt_long(argc, argv, "c:th", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test = 1;
			break;
		case 'p':
			probe = 1;
			break;
		case 'h':
			main_usage(stdout);
			return 0;
		case 'H':
			conf_help(stdout);
			return 0;
		case 'V':
			printf("ringproxy %s\n", RINGPROXY_VERSION);
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

	if (test) {
		rc = plan_print_conf(c, stdout) < 0 ? 1 : 0;
		if (rc == 0 && probe) {
			curl_global_init(CURL_GLOBAL_DEFAULT);
			rc = health_probe(c, stdout);
			curl_global_cleanup();
		}
		if (rc == 0)
			printf("\n%s: configuration ok\n", path);
		else if (probe)
			printf("\n%s: configuration ok, but a backend failed its probe\n", path);
		conf_free(c);
		return rc;
	}
	log_set_level((enum log_level)c->log_level);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = proxy_run(path, c);
	curl_global_cleanup();
	return rc;
}
