#!/usr/bin/env bash
# perftest across a real link: Debian's ib_write_bw (64 KiB WRITEs, the
# port's active MTU) between two network namespaces joined by a veth pair
# (link MTU 1500). The device must report an MTU whose packets fit the link
# (1024 here): with 4096 every datagram exceeds the link and the transfer
# never completes. Skipped (77) where namespaces cannot be made.
#   netns_perftest.sh LIBDIR PORT
set -u
libdir=$1 port=$2
SKIP=77
[ "$(id -u)" -eq 0 ] || { echo "SKIP: not root"; exit $SKIP; }
out=$(mktemp -d)
nsa=srpA$$ nsb=srpB$$
cleanup() {
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
ip netns add "$nsa" && ip netns add "$nsb" || { echo "SKIP: cannot create namespaces"; exit $SKIP; }
ip link add vpa$$ type veth peer name vpb$$ || { echo "SKIP: no veth"; exit $SKIP; }
ip link set vpa$$ netns "$nsa" && ip link set vpb$$ netns "$nsb"
ip -n "$nsa" addr add 10.235.0.1/24 dev vpa$$ && ip -n "$nsb" addr add 10.235.0.2/24 dev vpb$$
for n in "$nsa" "$nsb"; do ip -n "$n" link set lo up; done
ip -n "$nsa" link set vpa$$ up && ip -n "$nsb" link set vpb$$ up

ip netns exec "$nsa" env SOFTRDMA_ADDR=10.235.0.1 LD_LIBRARY_PATH="$libdir" \
  timeout 30 ib_write_bw -n 500 -s 65536 -p "$port" >"$out/srv" 2>&1 &
srv=$!
for _ in $(seq 100); do
  ip netns exec "$nsa" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
  sleep 0.1
done
ip netns exec "$nsb" env SOFTRDMA_ADDR=10.235.0.2 LD_LIBRARY_PATH="$libdir" \
  timeout 30 ib_write_bw -n 500 -s 65536 -p "$port" 10.235.0.1 >"$out/cli" 2>&1
crc=$?
wait $srv
src=$?
echo "--- server ($src)"; cat "$out/srv"
echo "--- client ($crc)"; cat "$out/cli"
[ $src -eq 0 ] && [ $crc -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
grep -qE "^ +65536 +500 " "$out/cli" || { echo "FAIL: no result line"; exit 1; }
grep -q "Mtu *: *1024" "$out/cli" || { echo "FAIL: active MTU is not 1024 on a 1500-byte link"; exit 1; }
echo PASS
