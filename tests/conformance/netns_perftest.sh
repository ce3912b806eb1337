#!/usr/bin/env bash
# perftest across a real link: Debian's ib_write_bw (the port's active MTU)
# between two network namespaces joined by a veth pair (link MTU 1500). The
# device must report an MTU whose packets fit the link (1024 here): with
# 4096 every datagram exceeds the link and the transfer never completes.
# Skipped (77) where namespaces cannot be made.
#   netns_perftest.sh LIBDIR PORT
# With tshark, ethtool and python3 (UDP segmentation offload off on the
# veth, so the kernel cuts GSO trains into the packets a wire carries), the
# WRITEs are also captured on the writer's end and checked (pcap_writes.py,
# pcap_icrc.py), every ICRC right: 64 KiB WRITEs (64 packets) as one WRITE
# ONLY per packet, each RETH covering its piece, the ACK asked for on a
# message's last piece; with SOFTRDMA_WRITE_ONLY=0 as FIRST/MIDDLE/LAST.
set -u
. "$(dirname "$0")/lib.sh"
libdir=$1 port=$2
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
nsa=srpA$$ nsb=srpB$$ va=vpa$$ vb=vpb$$
cap=
trap '[ -n "$cap" ] && kill $cap 2>/dev/null; sr_netns_del "$nsa" "$nsb"; rm -rf "$out"' EXIT
sr_netns_pair "$nsa" "$nsb" $va $vb 10.235.0.1 10.235.0.2

wire=1
for t in tshark ethtool python3; do
  command -v $t >/dev/null || { echo "note: $t not found, the WRITEs on the wire are not checked"; wire=0; }
done
if [ $wire = 1 ] && ! { ip netns exec "$nsa" ethtool -K $va tx-udp-segmentation off &&
                        ip netns exec "$nsb" ethtool -K $vb tx-udp-segmentation off; } >"$out/err" 2>&1; then
  echo "note: UDP segmentation offload stays on ($(cat "$out/err")): the WRITEs on the wire are not checked"
  wire=0
fi

fails=0
# pair [ENV...]: one ib_write_bw pair, $size x $iters on $port (run's)
pair() {
  ip netns exec "$nsa" env SOFTRDMA_ADDR=10.235.0.1 LD_LIBRARY_PATH="$libdir" "$@" \
    timeout 30 ib_write_bw -n $iters -s $size -p "$port" >"$out/srv" 2>&1 &
  srv=$!
  sr_wait_listen "$port" ip netns exec "$nsa"
  ip netns exec "$nsb" env SOFTRDMA_ADDR=10.235.0.2 LD_LIBRARY_PATH="$libdir" "$@" \
    timeout 30 ib_write_bw -n $iters -s $size -p "$port" 10.235.0.1 >"$out/cli" 2>&1
  crc=$?
  wait $srv
  src=$?
}
# run NAME SIZE ITERS MODE(only|whole) [ENV...]
run() {
  local name=$1 size=$2 iters=$3 mode=$4 src crc
  shift 4
  if [ $wire = 1 ]; then
    rm -f "$out/cap.pcap"
    ip netns exec "$nsb" tshark -n -i $vb -f "udp dst port 4791" -B 64 -F pcap -w "$out/cap.pcap" \
      -a duration:60 >"$out/tshark" 2>&1 &
    cap=$!
    for _ in $(seq 100); do
      grep -q "Capturing on" "$out/tshark" && [ -s "$out/cap.pcap" ] && break
      sleep 0.1
    done
  fi
  sr_perftest_tries "$out/cli" "$out/srv" -- pair "$@"
  echo "=== $name: ib_write_bw -n $iters -s $size ${*:+($*)}"
  sr_report $src $crc # exits on a failure (the trap stops the capture)
  grep -qE "^ +$size +$iters " "$out/cli" || { echo "FAIL [$name]: no result line"; fails=$((fails + 1)); }
  grep -q "Mtu *: *1024" "$out/cli" ||
    { echo "FAIL [$name]: active MTU is not 1024 on a 1500-byte link"; fails=$((fails + 1)); }
  if [ $wire = 1 ]; then
    sleep 0.5
    kill -INT $cap 2>/dev/null
    wait $cap
    cap=
    # at least 90% of the WRITE packets: a capture may miss some
    local want=$((iters * size / 1024 * 9 / 10))
    python3 "$here/pcap_writes.py" "$out/cap.pcap" $want 1024 $size $mode || fails=$((fails + 1))
    python3 "$here/pcap_icrc.py" "$out/cap.pcap" $want --want-gso-ids || fails=$((fails + 1))
  fi
  port=$((port + 1))
}

run write_only_64K 65536 500 only
run whole_64K 65536 200 whole SOFTRDMA_WRITE_ONLY=0
[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
