#!/usr/bin/env bash
# Dead peer: Debian's unmodified perftest (ib_write_bw) loses its peer
# mid-transfer and must fail with IBV_WC_RETRY_EXC_ERR ("Failed status 12")
# within the time its QP attributes imply, not hang.
# The survivor is the writer: it always has RDMA WRITEs in flight, so a dead
# responder is always noticed. (A ping-pong is the wrong probe: a peer killed
# after acknowledging a request and before posting its reply leaves the other
# side with nothing to retransmit, waiting for a receive forever, which is
# what IBTA prescribes and what a real HCA does too.)
#   dead_peer.sh LIBDIR PORT kill    the server is killed with SIGKILL
#   dead_peer.sh LIBDIR PORT netns   the server's namespace loses its link
#                                    (veth deleted, namespace removed)
# perftest uses timeout 14 (4.096 us * 2^14 = 67 ms) and retry_cnt 7:
# 8 expiries, about 0.54 s, after the last acknowledged packet. We allow 5 s.
set -u
. "$(dirname "$0")/lib.sh"
libdir=$1 port=$2 mode=$3
out=$(mktemp -d)
srv= cli= nsa= nsb=
cleanup() {
  for p in $srv $cli; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  sr_netns_del "$nsa" "$nsb"
  rm -rf "$out"
}
trap cleanup EXIT

# long enough never to finish by itself in the test's time
args=(-D 60 -s 65536 -p "$port")
sa=() sb=() target=127.0.0.1
if [ "$mode" = netns ]; then
  nsa=srdA$$ nsb=srdB$$
  sr_netns_pair "$nsa" "$nsb" vda$$ vdb$$ 10.232.0.1 10.232.0.2
  sa=(ip netns exec "$nsa" env SOFTRDMA_ADDR=10.232.0.1)
  sb=(ip netns exec "$nsb" env SOFTRDMA_ADDR=10.232.0.2)
  target=10.232.0.1
fi

# no timeout(1) wrapper: the signal must reach ib_write_bw itself (the trap
# kills whatever is left)
"${sa[@]}" env LD_LIBRARY_PATH="$libdir" ib_write_bw "${args[@]}" >"$out/srv" 2>&1 &
srv=$!
sr_wait_listen "$port" "${sa[@]}"
"${sb[@]}" env LD_LIBRARY_PATH="$libdir" ib_write_bw "${args[@]}" "$target" >"$out/cli" 2>&1 &
cli=$!
sleep 1.5 # traffic is flowing
kill -0 $cli 2>/dev/null || { echo "FAIL: client ended early"; cat "$out/cli"; exit 1; }
t0=$(date +%s%N)
if [ "$mode" = kill ]; then
  kill -9 $srv
else
  # the peer vanishes: its link goes, then its namespace
  ip -n "$nsa" link del vda$$
  ip netns del "$nsa"; nsa=
fi
# the survivor must end by itself, well within 5 s
for _ in $(seq 50); do
  kill -0 $cli 2>/dev/null || break
  sleep 0.1
done
if kill -0 $cli 2>/dev/null; then
  echo "FAIL: client still running 5 s after the peer died"; cat "$out/cli"; exit 1
fi
wait $cli
crc=$?
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "--- client (exit $crc after ${ms} ms)"; cat "$out/cli"
[ $crc -ne 0 ] || { echo "FAIL: client exited 0"; exit 1; }
# status 12 is IBV_WC_RETRY_EXC_ERR
grep -q "Failed status 12:" "$out/cli" ||
  { echo "FAIL: no RETRY_EXC_ERR completion reported"; exit 1; }
# 8 timer expiries of 67 ms: not earlier than the first, not much later than all
[ $ms -ge 60 ] || { echo "FAIL: gave up after ${ms} ms, before one timeout"; exit 1; }
[ $ms -le 4000 ] || { echo "FAIL: took ${ms} ms, far beyond 8 x 67 ms"; exit 1; }
echo PASS
