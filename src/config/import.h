/*
 * import.h -- `ringproxy import nginx|haproxy|ketama FILE`: read the
 * operator's NGINX upstream, HAProxy backend or nutcracker (twemproxy)
 * pool and print a ringproxy.ini that places every key where that proxy
 * does ([ring] scheme, one [backend NAME] per server with url, weight and
 * the id the scheme hashes). What ringproxy cannot reproduce is refused
 * with FILE:LINE. Reads the file (and NGINX's includes), writes text; the
 * main thread of a short-lived process.
 */
#ifndef RINGPROXY_IMPORT_H
#define RINGPROXY_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum import_format { IMPORT_NGINX, IMPORT_HAPROXY, IMPORT_KETAMA };

/* What an import said, in file order: errors ("FILE:LINE: what is wrong;
 * what to do") and warnings (the same, "FILE:LINE: warning: ..."). */
struct import_msgs {
	char **msg;
	size_t n;
	size_t nerr;            /* how many of them are errors */
};

/* What an import is asked besides the file. */
struct import_opts {
	const char *which;      /* the upstream (nginx), backend or listen
				   section (haproxy) or pool (nutcracker) to
				   import; NULL takes the only one there is */
	const char *names;      /* --names: "thumbs-%d", %d the server's place
				   from 1; NULL: names from the source */
};

/*
 * Read text[0..len) as format (enum import_format); name stands for the
 * file in messages and in the INI's opening comment, and "-" says the
 * text is stdin (nginx: nginx -T's output, its files followed by the
 * includes that name them; a file's NGINX includes are read from disk,
 * relative to its directory). o may be NULL (no options). Writes the
 * whole INI to out and returns 0 (m may hold warnings), or writes nothing
 * and returns -1 with every error in m. The caller frees m with
 * import_msgs_free either way.
 */
int import_text(int format, const char *name, const char *text, size_t len, const struct import_opts *o,
		FILE *out, struct import_msgs *m);

/* The same from the file at path (named so in messages; "-" stdin). */
int import_file(int format, const char *path, const struct import_opts *o, FILE *out, struct import_msgs *m);

/* Whether pattern is a --names pattern: one %d, the rest of a name. */
bool import_names_ok(const char *pattern);

void import_msgs_free(struct import_msgs *m);

/* The whole subcommand: argv[0] is "import". Returns the exit status:
 * 0 written to out, 1 the file cannot be imported (errors on stderr),
 * 2 usage. */
int import_main(int argc, char **argv, FILE *out);

#endif
