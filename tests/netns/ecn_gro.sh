#!/usr/bin/env bash
# ECN through GRO: runs of CE-marked and ECT(0) RoCEv2 datagrams, back to
# back over a veth pair whose receiving end aggregates (GRO on, NAPI in a
# thread so that a run queues up before it is polled), into a softrdma UDP
# socket with UDP_GRO. The kernel must not merge datagrams whose TOS
# differs (inet_gro_receive flushes on a TOS mismatch), and the driver must
# report each batch's mark for every datagram in it: ecn_gro checks every
# one. Fails if any datagram comes with another mark than its run's; skips
# (77) when the kernel merged nothing, since the check would then not
# involve GRO.
#   ecn_gro.sh ECN_GRO_BINARY
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../conformance/lib.sh"
bin=$1
out=$(mktemp -d)
A=srecna.$$ B=srecnb.$$
trap 'kill $rx 2>/dev/null; sr_netns_del "$A" "$B"; rm -rf "$out"' EXIT
rx=
sr_netns_pair "$A" "$B" eth0 eth0 10.237.0.1 10.237.0.2
command -v ethtool >/dev/null || { echo "SKIP: no ethtool"; exit $SKIP; }
ip netns exec "$A" ethtool -K eth0 tx off tso off gso off tx-udp-segmentation off >/dev/null 2>&1
ip netns exec "$B" ethtool -K eth0 gro on >/dev/null 2>&1 ||
  { echo "SKIP: cannot turn GRO on for veth"; exit $SKIP; }
# NAPI in a kthread: a sendmmsg's datagrams wait in the ring together
ip netns exec "$B" sh -c 'echo 1 > /sys/class/net/eth0/threaded' 2>/dev/null
ip netns exec "$B" "$bin" recv 10.237.0.2 16 64 >"$out/rx" 2>"$out/rx.err" &
rx=$!
for _ in $(seq 50); do grep -q ready "$out/rx" && break; sleep 0.1; done
ip netns exec "$A" "$bin" send 10.237.0.1 10.237.0.2 16 64 >"$out/tx" 2>&1
wait $rx
rc=$?
rx=
cat "$out/tx" "$out/rx" "$out/rx.err"
[ $rc -eq 0 ] || { echo "FAIL: a datagram lost its mark, or none arrived"; exit 1; }
gro=$(sed -n 's/.*gro_bufs=\([0-9]*\).*/\1/p' "$out/rx")
[ "${gro:-0}" -gt 0 ] || { echo "SKIP: GRO merged nothing here: the marks were read one datagram at a time"; exit $SKIP; }
echo PASS
