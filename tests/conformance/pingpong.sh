#!/usr/bin/env bash
# Runs an unmodified verbs client/server pair (Debian's ibverbs-utils) on
# softrdma over loopback and checks that both sides finish cleanly.
#   pingpong.sh LIBDIR PORT PROG [ARGS...]
# Server and client get the same ARGS (plus -p PORT); the client connects
# to 127.0.0.1. Bounded: each side has 60 s.
set -u
libdir=$1 port=$2 prog=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $srv 2>/dev/null' EXIT

LD_LIBRARY_PATH=$libdir timeout 60 "$prog" -p "$port" "$@" >"$out/srv" 2>&1 &
srv=$!
# wait for the server's TCP listener (out-of-band exchange), at most 10 s;
# look, don't connect: the server takes the first connection as its peer
for _ in $(seq 100); do
  ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
  sleep 0.1
done
LD_LIBRARY_PATH=$libdir timeout 60 "$prog" -p "$port" "$@" 127.0.0.1 >"$out/cli" 2>&1
crc=$?
wait $srv
src=$?
echo "--- server ($src)"; cat "$out/srv"
echo "--- client ($crc)"; cat "$out/cli"
[ $src -eq 0 ] && [ $crc -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
# the pingpongs print "N iters in ..."; ibv_xsrq_pingpong prints "success"
grep -qE "iters in|^success" "$out/srv" && grep -qE "iters in|^success" "$out/cli" || { echo "FAIL: no result line"; exit 1; }
# both sides must have talked to softrdma's device (RoCEv2 GIDs)
grep -q "GID ::ffff:127\." "$out/cli" || { echo "FAIL: not a softrdma loopback GID"; exit 1; }
# With SR_MAX_USEC_PER_ITER set, the client's "= X usec/iter" must stay
# below it (a guard against stalls per iteration, not a benchmark).
if [ -n "${SR_MAX_USEC_PER_ITER:-}" ]; then
  us=$(sed -n 's/.*= *\([0-9.]*\) usec\/iter.*/\1/p' "$out/cli")
  [ -n "$us" ] || { echo "FAIL: no usec/iter"; exit 1; }
  awk -v u="$us" -v m="$SR_MAX_USEC_PER_ITER" 'BEGIN { exit !(u < m) }' ||
    { echo "FAIL: $us usec/iter, limit $SR_MAX_USEC_PER_ITER"; exit 1; }
fi
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
