#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian packages that building and testing sqlprof need, and
# only those that are missing. Idempotent: a second run does nothing and
# takes well under a second. Runs apt-get as root (or through sudo).
#
# Usage: scripts/install-deps.sh [--optional]
#   --optional  also install the tools used by `make bench` and `make fuzz`
#               (ltrace, hyperfine, clang, protobuf-compiler).
set -euo pipefail

# The tests also use protoc (Perfetto export decoding) and headless
# Chromium (the HTML export's browser test); both are Debian packages.
# Perl's DBD::SQLite runs a real Perl client (t_exact_fork).
# tmux is the terminal of t_record_tty and t_top; procps gives pgrep.
# libmicrohttpd-dev is the HTTP server of `sqlprof agent --metrics` (linked
# into the CLI); prometheus is the real server t_agent_prometheus scrapes
# the agent with, and its promtool checks the exposition (t_agent_metrics);
# curl scrapes in those tests.
# SQLCipher is SQLite under another name (t_sqlcipher); PHP loads its SQLite
# extensions with RTLD_DEEPBIND (t_deepbind).
required=(build-essential pkg-config libsqlite3-dev sqlite3 libdw-dev libelf-dev
          libsqlcipher-dev libsqlcipher0 php-cli php-sqlite3
          protobuf-compiler chromium
          check elfutils python3 binutils valgrind libdbd-sqlite3-perl tmux procps
          libmicrohttpd-dev prometheus curl)
# Tcl's own SQLite binding (t_tcl): a dlopen'd extension, like Python's.
required+=(tcl libsqlite3-tcl)
# SQLite compiled into a program: the amalgamation comes from npm's sqlite3
# package (t_embedded_sqlite; npm comes with nodejs here), Go builds a cgo
# program with it (t_embedded_go).
required+=(golang-go)
# Debian's go-sqlite3 (GOPATH source in /usr/share/gocode): the Go
# program of t_attr_go_stack (database/sql + mattn/go-sqlite3, offline).
required+=(golang-github-mattn-go-sqlite3-dev)
# libiberty's rust_demangle: Rust's legacy and v0 names (symbolizer/sym.c).
required+=(libiberty-dev)
# Ruby's frames: an ActiveRecord program on Debian's Ruby (t_attr_ruby);
# PHP's use php-cli and php-sqlite3 above (t_attr_php).
required+=(ruby ruby-sqlite3 ruby-activerecord)
# gdb delivers a signal at an exact instruction of the preload
# (t_guest_signal_drawn: a handler inside a drawn execution's start).
required+=(gdb)
optional=(ltrace clang libclang-rt-14-dev protobuf-compiler)

want=("${required[@]}")
if [ "${1:-}" = "--optional" ]; then
	want+=("${optional[@]}")
fi

missing=()
for p in "${want[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
