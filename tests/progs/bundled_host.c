/* SPDX-License-Identifier: MIT */
/*
 * bundled_host.c - a program that loads plugins with RTLD_LOCAL, as a
 * Python interpreter loads its extension modules, and runs each one's
 * `plugin_run(n)`. The test (t_bundled_sqlite.sh) builds the plugins: one
 * linked with the system libsqlite3 (as Python's _sqlite3 is) and one
 * carrying its own SQLite under another soname (a vendored copy).
 *
 * usage: bundled_host N PLUGIN.so...   prints each plugin's result line;
 * exits 1 when a plugin cannot be loaded or its run fails.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;

	if (argc < 3 || n <= 0) {
		fprintf(stderr, "usage: bundled_host N PLUGIN.so...\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
		int (*run)(int, char *, size_t);
		char line[256];

		if (!h) {
			fprintf(stderr, "bundled_host: %s\n", dlerror());
			return 1;
		}
		*(void **)&run = dlsym(h, "plugin_run");
		if (!run) {
			fprintf(stderr, "bundled_host: %s has no plugin_run\n", argv[i]);
			return 1;
		}
		if (run(n, line, sizeof(line)) != 0) {
			printf("%s: FAILED: %s\n", argv[i], line);
			return 1;
		}
		printf("%s\n", line);
		fflush(stdout);
	}
	return 0;
}
