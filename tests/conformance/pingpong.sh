#!/usr/bin/env bash
# Runs an unmodified verbs client/server pair (Debian's ibverbs-utils) on
# softrdma over loopback and checks that both sides finish cleanly.
#   pingpong.sh LIBDIR PORT PROG [ARGS...]
# Server and client get the same ARGS (plus -p PORT); the client connects
# to 127.0.0.1. Bounded: each side has 60 s.
set -u
. "$(dirname "$0")/lib.sh"
libdir=$1 port=$2 prog=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $srv 2>/dev/null' EXIT

LD_LIBRARY_PATH=$libdir timeout 60 "$prog" -p "$port" "$@" >"$out/srv" 2>&1 &
srv=$!
sr_wait_listen "$port"
LD_LIBRARY_PATH=$libdir timeout 60 "$prog" -p "$port" "$@" 127.0.0.1 >"$out/cli" 2>&1
crc=$?
wait $srv
src=$?
sr_report $src $crc
# the pingpongs print "N iters in ..."; ibv_xsrq_pingpong prints "success"
grep -qE "iters in|^success" "$out/srv" && grep -qE "iters in|^success" "$out/cli" || { echo "FAIL: no result line"; exit 1; }
# -t (completion timestamps from an ibv_cq_ex): the timestamp deltas of
# the receive completions are reported
case " $* " in *" -t "*)
  grep -q "Average receive completion clock cycles" "$out/cli" ||
    { echo "FAIL: no completion timestamps"; exit 1; } ;;
esac
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
sr_check_faults
echo PASS
