#!/usr/bin/env bash
# Static IPv4 routes in srdma-switch (--route ADDR=PORT) override MAC
# learning: ten UDP datagrams from h0 to h2 leave by the port the route
# names, whether that is h2's own port or (to prove the route decides) h1's.
#   switch_route.sh SWITCH
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/switch_lib.sh"
swbin=$1
sw_test_begin 3
for r in 2 1; do
  sw_start "$swbin" "$out/sw" --route "${HOST_ADDR[2]}=$r"
  # bash's /dev/udp: no ping or netcat needed; the first send waits on ARP
  ip netns exec "${HOST_NS[0]}" bash -c \
    "for i in \$(seq 10); do echo x > /dev/udp/${HOST_ADDR[2]}/9000; sleep 0.05; done"
  sw_stop
  cat "$out/sw"
  other=$((3 - r))
  want=$(sw_counter "$out/sw" $r tx_frames) not=$(sw_counter "$out/sw" $other tx_frames)
  # ARP broadcasts are flooded to both; only routed datagrams pass 10
  [ "${want:-0}" -ge 10 ] && [ "${not:-0}" -lt 10 ] ||
    { echo "FAIL: route to port $r: port $r sent ${want:-0}, port $other ${not:-0}"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
