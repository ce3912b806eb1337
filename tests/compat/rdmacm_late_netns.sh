#!/bin/sh
# rdmacm_late_netns.sh LIBDIR RDMACM_STRESS
# A connect whose REQ reaches the passive host before its rdma_listen
# (as perftest -R's measured QPs do): rdmacm_stress late-server in
# namespace A listens 700 ms after it starts, late-client in B connects at
# once; both must succeed (docs/CM.md "Failures"). Exit 77 without
# namespaces.
set -u
lib=$1 stress=$2
# shellcheck source=netns.sh
. "$(dirname "$0")/netns.sh"
sr_netns_up
ip netns exec "$na" env LD_LIBRARY_PATH="$lib" SOFTRDMA_ADDR=10.233.0.1 \
    timeout 30 "$stress" late-server 10.233.0.1 18516 700 >"$tmp/s" 2>&1 &
spid=$!
sr_netns_kill=$spid
ip netns exec "$nb" env LD_LIBRARY_PATH="$lib" SOFTRDMA_ADDR=10.233.0.2 \
    timeout 30 "$stress" late-client 10.233.0.1 18516 >"$tmp/c" 2>&1
crc=$?
wait "$spid"
src=$?
sr_netns_kill=
echo "--- server (exit $src)"; cat "$tmp/s"
echo "--- client (exit $crc)"; cat "$tmp/c"
[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
echo PASS
