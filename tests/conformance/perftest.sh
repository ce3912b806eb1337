#!/usr/bin/env bash
# Runs one of Debian's unmodified perftest benchmarks (ib_write_bw, ...)
# between two processes on softrdma over loopback and checks that both
# sides finish and the client reports figures.
#   perftest.sh LIBDIR PORT PROG [ARGS...]
# Both sides get ARGS plus -x 0 (GID index 0: RoCE), -F (no failure on CPU
# frequency noise, which a loaded 2-core machine shows) and -p PORT; each has
# 120 s.
set -u
libdir=$1 port=$2 prog=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $srv 2>/dev/null' EXIT

LD_LIBRARY_PATH=$libdir timeout 120 "$prog" -F -x 0 -p "$port" "$@" >"$out/srv" 2>&1 &
srv=$!
for _ in $(seq 100); do
  ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
  sleep 0.1
done
LD_LIBRARY_PATH=$libdir timeout 120 "$prog" -F -x 0 -p "$port" "$@" 127.0.0.1 >"$out/cli" 2>&1
crc=$?
wait $srv
src=$?
echo "--- server ($src)"; cat "$out/srv"
echo "--- client ($crc)"; cat "$out/cli"
[ $src -eq 0 ] && [ $crc -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
# a result row: size, iterations, then figures
grep -qE '^ *[0-9]+ +[0-9]+ +[0-9]+\.[0-9]+' "$out/cli" || { echo "FAIL: no result row"; exit 1; }
grep -q "GID: 00:00:00:00:00:00:00:00:00:00:255:255:127" "$out/cli" || { echo "FAIL: not a softrdma GID"; exit 1; }
# With SR_EXPECT_FAULTS set (and SOFTRDMA_STATS=1), both sides must show
# injected faults, repaired by the transport, and what SR_EXPECT_FAULTS names.
if [ -n "${SR_EXPECT_FAULTS:-}" ]; then
  for side in srv cli; do
    line=$(grep "softrdma: stats" "$out/$side") || { echo "FAIL: no stats from $side"; exit 1; }
    for k in $SR_EXPECT_FAULTS; do
      echo "$line" | grep -qE "$k=[1-9]" || { echo "FAIL: $side: $k not above 0"; exit 1; }
    done
  done
fi
echo PASS
