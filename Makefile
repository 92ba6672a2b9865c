# SPDX-License-Identifier: MIT
# sqlprof - an LD_PRELOAD profiler for SQLite.
#
# Variables a user may set:
#   PREFIX=/usr/local   installation prefix (make install)
#   DESTDIR=            staging root for packaging (make install)
#   CC=gcc              C compiler
#   CFLAGS=...          extra compiler flags (appended)
#   SANITIZE=           e.g. address,undefined: build with -fsanitize (the preload
#                       and test programs without address: see below)
#   BUILD=build         output directory
#   BENCH_N=100000      executions in the overhead workload (make bench)
#   SOAK_SECONDS=600    each agent soak of make bench, seconds (0: none)
#   SOAK_EVERY_TEXT=1   0: only the soak at the preload's defaults
#   FUZZ_SECONDS=60     how long `make fuzz` runs each fuzz target
#   FUZZ_CC=clang       compiler for the fuzz targets (libFuzzer)
#
# Targets: all check demo bench fuzz tsan install clean help (make help).

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
CC ?= gcc
VERSION := 0.1.0
BENCH_N ?= 100000
SOAK_SECONDS ?= 600
SOAK_EVERY_TEXT ?= 1

PKGS := sqlite3 libdw libelf libmicrohttpd
DEPS_OK := $(shell pkg-config --exists $(PKGS) check 2>/dev/null && echo yes)

# The CLI's sources: report/ holds the shared helpers, one folder per
# module (record/, profile/, analysis/, output/) and cmds/, the entry point
# and the commands (docs/design.md, "Layout of report/"). Every folder is on the include path, so a file
# names a header by its file name wherever it lives.
REPORT_DIRS := report $(patsubst %/,%,$(wildcard report/*/))
REPORT_H := $(wildcard $(addsuffix /*.h,$(REPORT_DIRS)))

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -DSQLPROF_VERSION=\"$(VERSION)\" -Ipreload $(addprefix -I,$(REPORT_DIRS)) -Isymbolizer
ifneq ($(SANITIZE),)
BASE_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
SAN_LDFLAGS := -fsanitize=$(SANITIZE)
endif
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)
# The preload and the test programs get SANITIZE without "address": ASan's
# runtime must be first in a process's initial library list, and
# LD_PRELOAD=libsqlprof.so is loaded before it (ASan aborts: "ASan runtime
# does not come first") - in our test programs and in programs built
# without ASan (the sqlite3 shell, python3) alike. The CLI and the unit
# tests get everything. (Also tried: LD_PRELOAD of libasan.so ahead of
# everything with ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 for
# the integration tests; the suite ran clean under it, preload included,
# but third-party programs the tests start, such as chromium, break under
# ASan themselves.) `make tsan` covers the preload's threading.
sp_comma := ,
sp_empty :=
sp_space := $(sp_empty) $(sp_empty)
PRELOAD_SAN := $(subst $(sp_space),$(sp_comma),$(strip $(filter-out address,$(subst $(sp_comma), ,$(SANITIZE)))))
PRELOAD_CFLAGS = $(filter-out -fsanitize=%,$(ALL_CFLAGS)) $(if $(PRELOAD_SAN),-fsanitize=$(PRELOAD_SAN))
PRELOAD_SAN_LDFLAGS := $(if $(PRELOAD_SAN),-fsanitize=$(PRELOAD_SAN))
# Under SANITIZE, a UBSan report stops the program (and so fails its test)
# instead of scrolling past on stderr.
SAN_ENV := $(if $(SANITIZE),UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)

PRELOAD_SRC := $(wildcard preload/*.c)
CLI_SRC := $(filter-out report/cmds/main.c,$(wildcard $(addsuffix /*.c,$(REPORT_DIRS))))
SYM_SRC := $(wildcard symbolizer/*.c)
CHECK_SRC := $(wildcard tests/check_*.c)
PROG_SRC := $(wildcard tests/progs/*.c)

# The preload shortens SQL texts too long to send with the fingerprinter's
# lexer (sp_sql_shrink), so report/profile/fingerprint.c is built into it too.
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/preload/fingerprint.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
SYM_OBJ := $(SYM_SRC:%.c=$(BUILD)/obj/%.o)
CHECK_BIN := $(CHECK_SRC:tests/%.c=$(BUILD)/tests/%)
PROG_BIN := $(PROG_SRC:tests/progs/%.c=$(BUILD)/progs/%)

LIBSQLPROF := $(BUILD)/lib/libsqlprof.so
SQLPROF := $(BUILD)/bin/sqlprof
LIBSYM := $(BUILD)/lib/libsym.a
LIBCLI := $(BUILD)/lib/libspcli.a

# libiberty (libiberty-dev, static): its rust_demangle demangles Rust's legacy
# and v0 names in symbolizer/sym.c. libdw and libelf are not linked: the
# symbolizer loads libdw (dlopen, by its soname) when it first opens a module
# (symbolizer/dwload.c), so a command with nothing to symbolize starts without
# them and the five libraries they need.
LIBS := -lsqlite3 -lm -lpthread -liberty
DW_LIBDIR := $(shell pkg-config --variable=libdir libdw 2>/dev/null)
DW_SONAME := $(or $(shell objdump -p "$(DW_LIBDIR)/libdw.so" 2>/dev/null | awk '/SONAME/ { print $$2 }'),libdw.so.1)
$(BUILD)/obj/symbolizer/dwload.o: ALL_CFLAGS += -DSYM_DW_SONAME=\"$(DW_SONAME)\" $(if $(DW_LIBDIR),-DSYM_DW_PATH=\"$(DW_LIBDIR)/$(DW_SONAME)\")
# libmicrohttpd serves `sqlprof agent --metrics` (report/record/metrics.c): the
# CLI loads it (dlopen, by its soname) when --metrics starts, so that no other
# command loads it and the 10 TLS libraries it needs; the fuzz targets link it.
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
MHD_SONAME := $(or $(shell objdump -p "$$(pkg-config --variable=libdir libmicrohttpd 2>/dev/null)/libmicrohttpd.so" 2>/dev/null | awk '/SONAME/ { print $$2 }'),libmicrohttpd.so.12)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

.PHONY: all check demo bench install clean help deps unit integration progs
.DEFAULT_GOAL := all

all: deps-ok $(LIBSQLPROF) $(SQLPROF)

# Build-time dependencies are installed by scripts/install-deps.sh; `make all`
# only tells you to run it, `make check` and `make demo` run it themselves.
.PHONY: deps-ok
deps-ok:
ifneq ($(DEPS_OK),yes)
	@echo "sqlprof: missing build dependencies; run scripts/install-deps.sh (or make check / make demo)" >&2; exit 1
endif

deps:
	@scripts/install-deps.sh

$(BUILD)/obj/preload/%.o: preload/%.c preload/*.h
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -fPIC -fvisibility=hidden -ftls-model=initial-exec -fno-tree-slp-vectorize -fstack-usage -c $< -o $@

$(BUILD)/obj/%.o: %.c $(REPORT_H) $(wildcard symbolizer/*.h preload/sp_wire.h preload/sp_probe.h)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/preload/fingerprint.o: report/profile/fingerprint.c report/profile/fingerprint.h report/hash.h
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@
$(BUILD)/obj/preload/stmt.o: report/profile/fingerprint.h

# The version script: the interposers of sp_api.h's list (libsqlprof.map.in).
$(BUILD)/obj/preload/libsqlprof.map: preload/libsqlprof.map.in preload/sp_api.h
	@mkdir -p $(@D)
	$(CC) -E -P -x c -Ipreload $< -o $@

$(LIBSQLPROF): $(PRELOAD_OBJ) $(BUILD)/obj/preload/libsqlprof.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(PRELOAD_OBJ) $(PRELOAD_SAN_LDFLAGS) -Wl,--no-undefined -Wl,--version-script=$(BUILD)/obj/preload/libsqlprof.map -Wl,-z,now -ldl -lpthread -lm

$(LIBSYM): $(SYM_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIBCLI): $(CLI_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(SQLPROF): $(BUILD)/obj/report/cmds/main.o $(LIBCLI) $(LIBSYM)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(LIBCLI) $(LIBSYM) $(SAN_LDFLAGS) -rdynamic $(LIBS) -ldl

$(BUILD)/obj/report/record/metrics.o: ALL_CFLAGS += $(MHD_CFLAGS) -DSP_MHD_SONAME=\"$(MHD_SONAME)\"

$(BUILD)/tests/%: tests/%.c $(LIBCLI) $(LIBSYM)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIBCLI) $(LIBSYM) $(SAN_LDFLAGS) $(LIBS) $(CHECK_LIBS)

# check_unwind compiles the unwinder itself (#include "../preload/unwind.c",
# and gostack.c, the Go frames its walk goes on with).
$(BUILD)/tests/check_unwind: preload/unwind.c preload/gostack.c preload/sp_preload.h preload/sp_wire.h
# check_params runs the bound values' hash and probe (header-only) itself.
$(BUILD)/tests/check_params: preload/sp_params.h preload/sp_probe.h

# Test programs: built with -g at -O2, no frame pointers (what users ship).
$(BUILD)/progs/%: tests/progs/%.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -fno-omit-frame-pointer -D_GNU_SOURCE $(PRELOAD_SAN_LDFLAGS) -o $@ $< -lsqlite3 -lpthread -ldl

# A host of RTLD_LOCAL plugins, itself without libsqlite3 (t_bundled_sqlite).
$(BUILD)/progs/bundled_host: tests/progs/bundled_host.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -fno-omit-frame-pointer -D_GNU_SOURCE $(PRELOAD_SAN_LDFLAGS) -o $@ $< -ldl

progs: $(PROG_BIN)

# Symbolizer fixtures: build.sh writes markers.txt last, so its presence
# means the whole set is complete.
SYM_FIXTURE_DIR := $(BUILD)/fixtures/sym
$(SYM_FIXTURE_DIR)/markers.txt: $(wildcard tests/fixtures/sym/*)
	CC="$(CC)" tests/fixtures/sym/build.sh $(SYM_FIXTURE_DIR)

# check's per-test time limits (4 s unless a suite sets one) are caps for
# a hang: scaled by the load average per core (at least 1, at most 20), so
# that a busy machine does not fail a test that is merely slow
# (CK_TIMEOUT_MULTIPLIER set by the user wins).
CK_MULT = $${CK_TIMEOUT_MULTIPLIER:-$$(awk -v n=$$(nproc) '{ m = int($$1 / n + 0.5); print (m < 1 ? 1 : (m > 20 ? 20 : m)) }' /proc/loadavg 2>/dev/null || echo 1)}
unit: all $(CHECK_BIN) $(SYM_FIXTURE_DIR)/markers.txt
	@set -e; m=$(CK_MULT); echo "unit: check's time limits x $$m (load $$(cut -d' ' -f1 /proc/loadavg))"; \
	for t in $(CHECK_BIN); do echo "== $$t"; $(SAN_ENV) CK_TIMEOUT_MULTIPLIER=$$m SYM_FIXTURE_DIR=$(SYM_FIXTURE_DIR) $$t; done

integration: all progs
	@$(SAN_ENV) SANITIZE=$(SANITIZE) BUILD=$(BUILD) tests/run-integration.sh

check: deps
	@$(MAKE) --no-print-directory unit integration
	@echo "make check: all tests passed"

demo: deps
	@$(MAKE) --no-print-directory all progs
	@scripts/demo.sh $(BUILD)

bench: deps
	@scripts/install-deps.sh --optional
	@$(MAKE) --no-print-directory all progs
	@BUILD=$(BUILD) BENCH_N=$(BENCH_N) SOAK_SECONDS=$(SOAK_SECONDS) SOAK_EVERY_TEXT=$(SOAK_EVERY_TEXT) scripts/bench.sh

# Fuzzing: libFuzzer targets (tests/fuzz/) for the stream decoder and the
# profile readers, built with clang, ASan and UBSan, with the CLI and
# symbolizer sources compiled in; scripts/fuzz.sh runs each for
# FUZZ_SECONDS, starting from the seeds in tests/fuzz/corpus/.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_CFLAGS := -std=gnu11 -O1 -g -D_GNU_SOURCE -DSQLPROF_VERSION=\"$(VERSION)\" \
	-Ipreload $(addprefix -I,$(REPORT_DIRS)) -Isymbolizer -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_BIN := $(FUZZ_DIR)/fuzz_stream $(FUZZ_DIR)/fuzz_profile

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(CLI_SRC) $(SYM_SRC) $(REPORT_H) $(wildcard symbolizer/*.h preload/sp_wire.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(CLI_SRC) $(SYM_SRC) $(MHD_CFLAGS) $(LIBS) $(MHD_LIBS)

.PHONY: fuzz
fuzz: deps
	@scripts/install-deps.sh --optional
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
	@scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

# ThreadSanitizer: the preload, the CLI and the test programs built with
# -fsanitize=thread into $(BUILD)/tsan, then the threaded and forking
# integration tests on that build. A race report makes the program exit
# 66, which fails its test. (t_robust_closefds is left out: closing the
# preload's socket under its flusher thread is the point of that test, and
# TSan reports it as a race on the descriptor.)
TSAN_TESTS := t_threads t_robust_threads t_robust_killed t_robust_stall t_fork t_robust_tree

.PHONY: tsan
tsan: deps
	@$(MAKE) --no-print-directory SANITIZE=thread BUILD=$(BUILD)/tsan all progs
	@# die_after_fork=0: a forked child of a threaded program starts its own
	@# flusher thread at its first query, which glibc supports and TSan
	@# refuses by default.
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66 die_after_fork=0 $${TSAN_OPTIONS:-}" BUILD=$(BUILD)/tsan \
		tests/run-integration.sh $(TSAN_TESTS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/sqlprof $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(SQLPROF) $(DESTDIR)$(PREFIX)/bin/sqlprof
	install -m 0755 $(LIBSQLPROF) $(DESTDIR)$(PREFIX)/lib/sqlprof/libsqlprof.so
	install -m 0644 docs/sqlprof.1 $(DESTDIR)$(PREFIX)/share/man/man1/sqlprof.1

clean:
	rm -rf $(BUILD)

help:
	@echo "make            build libsqlprof.so and sqlprof into $(BUILD)/"
	@echo "make check      install missing packages, build, run unit and integration tests"
	@echo "make demo       install missing packages, build, profile an example program, print a report"
	@echo "make bench      callgrind instruction overhead of the preload (slow)"
	@echo "make fuzz       run the libFuzzer targets FUZZ_SECONDS (60) each (tests/fuzz/)"
	@echo "make tsan       ThreadSanitizer build of the preload, threaded integration tests"
	@echo "make install    install into DESTDIR/PREFIX (default /usr/local)"
	@echo "make clean      remove $(BUILD)/"
	@echo "Variables: PREFIX DESTDIR CC CFLAGS SANITIZE BUILD BENCH_N FUZZ_SECONDS FUZZ_CC (see the top of the Makefile)"
