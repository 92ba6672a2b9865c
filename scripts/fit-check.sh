#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What libsqlprof.so takes from every process it is preloaded into, checked
# from the build (issue 23, "fit in any process"):
#  - static TLS (the PT_TLS segment's memory size) at most 1024 bytes: glibc
#    takes it from every thread's stack (a 16 KiB thread failed with EINVAL
#    at 20 KiB) and an audit library (LD_AUDIT) needs room in the static TLS
#    block it shares;
#  - no function of the preload with a stack frame above 2048 bytes, from
#    gcc's -fstack-usage files (BUILD/obj/preload/*.su, made by the
#    Makefile), but those listed in KNOWN below with their reason.
# Usage: scripts/fit-check.sh [BUILD_DIR]   (default build)
# Exits 0 when both hold, 1 (saying what) when not, 2 when the build lacks
# the library or the .su files.
set -euo pipefail
build=${1:-build}
lib=$build/lib/libsqlprof.so
TLS_MAX=1024
FRAME_MAX=2048
# file:function of frames above FRAME_MAX that are known, each with why; a
# new one fails. Remove a line when its frame shrinks.
KNOWN='
preload/stream.c:hello_build         HELLO record built on the stack (HELLO_MAX, 4.1 KiB): connect path, not yet moved
preload/stream.c:hello               calls hello_build with its buffer (same)
preload/stream.c:data_file           HELLO for the file of an image that could not connect, or that exits with no collector (same)
preload/stream.c:sp_modules_maybe_send  struct modbuf holds the executable path (PATH_MAX): module map, not yet moved
preload/sp_probe.h:sp_probe_params_db   the bound-values layout probe, once per process: not yet moved
'
[ -f "$lib" ] || { echo "fit-check: $lib not built" >&2; exit 2; }
ls "$build"/obj/preload/*.su >/dev/null 2>&1 || { echo "fit-check: no $build/obj/preload/*.su (built without -fstack-usage?)" >&2; exit 2; }
rc=0
tls=$(readelf -lW "$lib" | awk '$1 == "TLS" { print $6 }')
tls=$((${tls:-0}))
if [ "$tls" -gt "$TLS_MAX" ]; then
	echo "fit-check: static TLS of $lib is $tls bytes (at most $TLS_MAX)"
	readelf -sW "$lib" | awk '$4 == "TLS" { print "  " $3 " bytes " $8 }' | sort -k2 -n
	rc=1
fi
echo "static TLS: $tls bytes (at most $TLS_MAX)"
while IFS=$'\t' read -r where size kind; do
	file=${where%%:*}
	fn=${where##*:}
	[ "$size" -gt "$FRAME_MAX" ] || continue
	if printf '%s\n' "$KNOWN" | awk -v k="$file:$fn" '$1 == k { f = 1 } END { exit !f }'; then
		echo "known: $file:$fn $size bytes"
		continue
	fi
	echo "fit-check: $file:$fn has a $size-byte stack frame ($kind; at most $FRAME_MAX)"
	rc=1
done < <(cat "$build"/obj/preload/*.su)
exit $rc
