#!/usr/bin/env bash
# perftest_netns.sh LIBDIR PROG [ARGS...]
# perftest's PROG with -R (control exchange and measured QPs through
# rdma_cm) between two network namespaces joined by a veth pair
# (netns.sh): the server in A (SOFTRDMA_ADDR=10.233.0.1), the client in B
# (SOFTRDMA_ADDR=10.233.0.2) connecting to 10.233.0.1, so every MAD and
# data packet crosses the veth as RoCEv2 over UDP. Both exit 0 within
# 60 s, the client prints its result row, the server ran with rdma_cm QPs,
# and B's veth end carried the traffic. Exit 77 without namespaces.
set -u
lib=$1 prog=$2
shift 2
# shellcheck source=netns.sh
. "$(dirname "$0")/netns.sh"
# shellcheck source=../conformance/lib.sh
. "$(dirname "$0")/../conformance/lib.sh"
sr_netns_up
port=18515 # the namespaces are this test's alone
pk0=$(sr_netns_packets)
# one server/client pair; made again when perftest's clock calibration
# failed (sr_perftest_tries, tests/conformance/lib.sh)
pair() {
  ip netns exec "$na" env LD_LIBRARY_PATH="$lib" SOFTRDMA_ADDR=10.233.0.1 \
    timeout 60 "$prog" -R -F -x 0 -p $port "$@" >"$tmp/s" 2>&1 &
  spid=$!
  sr_netns_kill=$spid
  sr_netns_wait_cm "$na" 106 $port || echo "note: no listener entry after 10 s"
  ip netns exec "$nb" env LD_LIBRARY_PATH="$lib" SOFTRDMA_ADDR=10.233.0.2 \
    timeout 60 "$prog" -R -F -x 0 -p $port "$@" 10.233.0.1 >"$tmp/c" 2>&1
  crc=$?
  wait "$spid"
  src=$?
}
sr_perftest_tries "$tmp/c" "$tmp/s" -- pair "$@"
sr_netns_kill=
pk=$(($(sr_netns_packets) - pk0))
echo "--- server in $na (exit $src)"; tail -n 20 "$tmp/s"
echo "--- client in $nb (exit $crc); $vb carried $pk packets"; tail -n 20 "$tmp/c"
[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
grep -qE '^ *[0-9]+ +[0-9]+ +[0-9]+\.[0-9]+' "$tmp/c" || { echo "FAIL: no result row"; exit 1; }
grep -qE 'rdma_cm QPs.*: ON' "$tmp/s" || { echo "FAIL: the server did not use rdma_cm"; exit 1; }
# the measured run alone is 1000 iterations or more (a GSO packet on the
# veth is at most 64 KB, one message of ib_write_bw's 5000)
[ "$pk" -ge 1000 ] || { echo "FAIL: only $pk packets crossed the veth"; exit 1; }
echo PASS
