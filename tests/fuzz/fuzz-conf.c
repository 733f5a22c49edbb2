/*
 * fuzz-conf.c -- libFuzzer target for the config loader (conf.c): any
 * bytes as an INI file. No crash, no leak, and the contract holds: either
 * a config that satisfies every rule the proxy relies on, or at least one
 * error, each starting with the file name. It runs in an empty
 * directory of its own, so that an include = GLOB reads no file of
 * whoever runs it (an include then names no file: an error of fuzz.ini's).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/conf.h"
#include "ring/ring.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[] = "/tmp/fuzz-conf-XXXXXX";

static void fuzz_dir_remove(void)
{
	if (chdir("/") == 0)
		rmdir(fuzz_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!mkdtemp(fuzz_dir) || chdir(fuzz_dir) < 0) {
		perror("fuzz-conf: an empty directory to run in");
		abort();
	}
	atexit(fuzz_dir_remove);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf_errors errs;
	struct conf *c;
	char *text;
	int live = 0;

	if (size > 65536)
		return 0;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	c = conf_load_string("fuzz.ini", text, &errs);
	if (c) {
		if (errs.n != 0 || c->nbackends == 0 || c->vnodes < 1 || c->buffer_size < c->max_head_size)
			abort();
		for (size_t i = 0; i < c->nbackends; i++) {
			const struct conf_backend *b = &c->backends[i];

			if (!b->name || !b->url || !b->host || !b->prefix || !b->health.path ||
			    b->port == 0 || b->weight < 0 || !(b->weight <= 1000))
				abort();
			live += b->weight > 0;
		}
		if (!live)
			abort();
	} else {
		if (errs.n == 0)
			abort();
		for (size_t i = 0; i < errs.n; i++)
			if (strncmp(errs.msg[i], "fuzz.ini", 8) != 0)
				abort();
	}
	conf_free(c);
	conf_errors_free(&errs);
	free(text);
	return 0;
}
