#!/usr/bin/env bash
# Runs one of Debian's unmodified perftest benchmarks (ib_write_bw, ...)
# between two processes on softrdma over loopback and checks that both
# sides finish and the client reports figures.
#   perftest.sh LIBDIR PORT PROG [ARGS...]
# Both sides get ARGS plus -x 0 (GID index 0: RoCE), -F (no failure on CPU
# frequency noise, which a loaded 2-core machine shows) and -p PORT; each has
# 120 s.
set -u
. "$(dirname "$0")/lib.sh"
libdir=$1 port=$2 prog=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $srv 2>/dev/null' EXIT

pair() {
  LD_LIBRARY_PATH=$libdir timeout 120 "$prog" -F -x 0 -p "$port" "$@" >"$out/srv" 2>&1 &
  srv=$!
  sr_wait_listen "$port"
  LD_LIBRARY_PATH=$libdir timeout 120 "$prog" -F -x 0 -p "$port" "$@" 127.0.0.1 >"$out/cli" 2>&1
  crc=$?
  wait $srv
  src=$?
}
sr_perftest_tries "$out/cli" "$out/srv" -- pair "$@"
sr_report $src $crc
# a result row: size, iterations, then figures
grep -qE '^ *[0-9]+ +[0-9]+ +[0-9]+\.[0-9]+' "$out/cli" || { echo "FAIL: no result row"; exit 1; }
grep -q "GID: 00:00:00:00:00:00:00:00:00:00:255:255:127" "$out/cli" || { echo "FAIL: not a softrdma GID"; exit 1; }
sr_check_faults
echo PASS
