#!/usr/bin/env bash
# perftest across a real link: Debian's ib_write_bw (64 KiB WRITEs, the
# port's active MTU) between two network namespaces joined by a veth pair
# (link MTU 1500). The device must report an MTU whose packets fit the link
# (1024 here): with 4096 every datagram exceeds the link and the transfer
# never completes. Skipped (77) where namespaces cannot be made.
#   netns_perftest.sh LIBDIR PORT
set -u
. "$(dirname "$0")/lib.sh"
libdir=$1 port=$2
out=$(mktemp -d)
nsa=srpA$$ nsb=srpB$$
trap 'sr_netns_del "$nsa" "$nsb"; rm -rf "$out"' EXIT
sr_netns_pair "$nsa" "$nsb" vpa$$ vpb$$ 10.235.0.1 10.235.0.2

ip netns exec "$nsa" env SOFTRDMA_ADDR=10.235.0.1 LD_LIBRARY_PATH="$libdir" \
  timeout 30 ib_write_bw -n 500 -s 65536 -p "$port" >"$out/srv" 2>&1 &
srv=$!
sr_wait_listen "$port" ip netns exec "$nsa"
ip netns exec "$nsb" env SOFTRDMA_ADDR=10.235.0.2 LD_LIBRARY_PATH="$libdir" \
  timeout 30 ib_write_bw -n 500 -s 65536 -p "$port" 10.235.0.1 >"$out/cli" 2>&1
crc=$?
wait $srv
src=$?
sr_report $src $crc
grep -qE "^ +65536 +500 " "$out/cli" || { echo "FAIL: no result line"; exit 1; }
grep -q "Mtu *: *1024" "$out/cli" || { echo "FAIL: active MTU is not 1024 on a 1500-byte link"; exit 1; }
echo PASS
