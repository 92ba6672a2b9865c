#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# attr_matrix.sh - the attribution fixture (tests/fixtures/attr: inlining,
# C++ overloads, threads, a fork, a shared library, a dlopen'd plugin, a
# wrapper) built by gcc and clang in every variant below, each recorded
# at --rate 1 and every site it reports classified by
# tests/integration/attr_check.py's "honest" mode: right (the function,
# file, line and module of expected.tsv), degraded (?? or line 0 in the
# right module: the information is not there) or WRONG (another function
# or line). Writes the table to OUT (docs/attribution.md's measured
# section is this table) and exits 1 when any site is wrong. Run by
# `make bench`; takes about two minutes.
#
#   O0 O2 O3     -g at that level
#   lto          -O2 -flto (clang: with lld)
#   split        -O2 -gsplit-dwarf, the .dwo files next to the binaries
#   dwp          the same packed into a .dwp, the .dwo files removed
#                (libdw 0.188 cannot read a .dwp: degraded)
#   gz           -O2 -gz (zlib-compressed debug sections)
#   debuglink    stripped, debug info in FILE.debug via .gnu_debuglink
#   buildid      stripped, debug info in DIR/.build-id/xx/yyy.debug,
#                found with `record --debug-dir DIR`
#   stripped     stripped, no debug info anywhere (degraded)
#
# usage: scripts/attr_matrix.sh [BUILD [OUT]]   (default build, BUILD/attr-matrix.md)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=${2:-$build/attr-matrix.md}
src=$root/tests/fixtures/attr
sqlprof=$build/bin/sqlprof
check=(python3 "$root/tests/integration/attr_check.py")
dir=$build/attr-matrix
rm -rf "$dir"
mkdir -p "$dir"
"$src/build.sh" "$build/fixtures/attr" >/dev/null || { echo "attr_matrix: fixture build failed" >&2; exit 2; }
markers=$build/fixtures/attr/markers.txt

build_one() { # OUTDIR CC CXX OPT...
	local o=$1 cc=$2 cxx=$3
	shift 3
	mkdir -p "$o/obj"
	# in OUTDIR: -gsplit-dwarf writes the .dwo files of one-step builds
	# into the current directory
	(cd "$o" &&
		"$cc" -std=gnu11 "$@" -fPIC -shared -o libattr_lib.so "$src/attr_lib.c" -lsqlite3 &&
		"$cc" -std=gnu11 "$@" -fPIC -shared -o attr_mod.so "$src/attr_mod.c" -lsqlite3 &&
		"$cc" -std=gnu11 "$@" -c -o obj/attr_main.o "$src/attr_main.c" &&
		"$cxx" "$@" -c -o obj/attr_cxx.o "$src/attr_cxx.cc" &&
		"$cxx" "$@" -o attr_main obj/attr_main.o obj/attr_cxx.o -L. -lattr_lib \
			-Wl,-rpath,'$ORIGIN' -lsqlite3 -lpthread -ldl)
}

bins=(attr_main libattr_lib.so attr_mod.so)
rows=()
wrong_total=0
for comp in gcc:g++ clang:clang++; do
	cc=${comp%%:*} cxx=${comp#*:}
	command -v "$cc" >/dev/null && command -v "$cxx" >/dev/null || {
		rows+=("| $cc | (not installed) | | | |")
		continue
	}
	for v in O0 O2 O3 lto split dwp gz debuglink buildid stripped; do
		o=$dir/$cc-$v
		base=(-g -D_GNU_SOURCE -Wl,--build-id)
		extra=()
		case $v in
		O0 | O2 | O3) opt=(-"$v") ;;
		lto) opt=(-O2 -flto) && [ "$cc" = clang ] && opt+=(-fuse-ld=lld) ;;
		split | dwp) opt=(-O2 -gsplit-dwarf) ;;
		gz) opt=(-O2 -gz) ;;
		*) opt=(-O2) ;;
		esac
		if ! build_one "$o" "$cc" "$cxx" "${opt[@]}" "${base[@]}" >"$o.build" 2>&1; then
			rows+=("| $cc | $v | build failed | | |")
			continue
		fi
		case $v in
		dwp)
			dwp -o "$o/attr_main.dwp" "$o"/obj/*.dwo >/dev/null 2>&1
			rm -f "$o"/*.dwo "$o"/obj/*.dwo
			;;
		debuglink | buildid | stripped)
			for f in "${bins[@]}"; do
				if [ "$v" = debuglink ]; then
					objcopy --only-keep-debug "$o/$f" "$o/$f.debug"
					strip --strip-all "$o/$f"
					objcopy --add-gnu-debuglink="$o/$f.debug" "$o/$f"
				elif [ "$v" = buildid ]; then
					id=$(readelf -n "$o/$f" | awk '/Build ID/ {print $3}')
					mkdir -p "$o/dbg/.build-id/${id:0:2}"
					objcopy --only-keep-debug "$o/$f" "$o/dbg/.build-id/${id:0:2}/${id:2}.debug"
					strip --strip-all "$o/$f"
				else
					strip --strip-all "$o/$f"
				fi
			done
			[ "$v" = buildid ] && extra=(--debug-dir "$o/dbg")
			;;
		esac
		# a loaded machine's collector may fall behind at --rate 1: sampled
		# executions are then lost (counted in the profile's meta 'lost'),
		# and a site whose samples were all lost is missing, not wrong.
		# Such a recording is made again, up to 3 times; a row that still
		# misses sites with records lost says so ("N lost").
		for attempt in 1 2 3; do
			(cd "$o" && "$sqlprof" record -q --rate 1 --seed 1 "${extra[@]}" -o "$o.db" -- ./attr_main \
				>"$o.out" 2>&1)
			[ "$(cat "$o.out")" = "attr ok" ] || break
			"$sqlprof" report --format json "$o.db" >"$o.json"
			"${check[@]}" sites honest "$o.json" "$markers" "$src/expected.tsv" --table >"$o.chk" 2>&1
			right=$(grep -c ' right$' "$o.chk")
			degraded=$(grep -c ' degraded' "$o.chk")
			wrong=$(grep -c ' WRONG$' "$o.chk")
			lost=$(sqlite3 "$o.db" "SELECT value FROM meta WHERE key = 'lost'" 2>/dev/null || echo 0)
			[ "$wrong" = 0 ] && [ "${lost:-0}" != 0 ] && [ $((right + degraded)) -lt 18 ] || break
			echo "attr_matrix: $cc $v: $lost records lost (loaded machine), $((right + degraded)) of 18 sites: recorded again" >&2
		done
		if [ "$(cat "$o.out")" != "attr ok" ]; then
			rows+=("| $cc | $v | run failed: $(head -c 80 "$o.out") | | |")
			wrong_total=$((wrong_total + 1))
			continue
		fi
		wrong_total=$((wrong_total + wrong))
		if [ "${lost:-0}" != 0 ] && [ $((right + degraded)) -lt 18 ]; then
			rows+=("| $cc | $v | $right ($lost lost) | $degraded | $wrong |")
		else
			rows+=("| $cc | $v | $right | $degraded | $wrong |")
		fi
		echo "attr_matrix: $cc $v: right $right, degraded $degraded, wrong $wrong" >&2
	done
done
{
	echo "| compiler | variant | sites right | honestly degraded | wrong |"
	echo "|---|---|---:|---:|---:|"
	printf '%s\n' "${rows[@]}"
} >"$out"
echo "attr_matrix: table in $out; $wrong_total wrong" >&2
[ "$wrong_total" -eq 0 ]
