#!/usr/bin/env bash
# ECN marking in srdma-switch: h0 sends ECT(0) and h1 not-ECT UDP to h2
# through a 100 Mb/s egress with a low Kmin; the switch must count marks,
# and the pcap of the egress port must show CE-marked IPv4 packets with
# valid header checksums, none of them not-ECT (pcap_ce.py; tshark, when
# present, must read the capture and agree there are CE packets).
#   switch_ecn.sh SWITCH
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/switch_lib.sh"
swbin=$1
sw_test_begin 3 python3

sw_start "$swbin" "$out/sw" --rate 100M --buffer 256K --kmin 4K --kmax 64K --pmax 0.5 \
  --pcap "$out/egress.pcap" --pcap-port 2 --stats-csv "$out/stats.csv"
ip netns exec "${HOST_NS[0]}" python3 "$here/udp_blast.py" "${HOST_ADDR[2]}" 9001 0x02 3.5 >"$out/b0" 2>&1 &
b0=$!
ip netns exec "${HOST_NS[1]}" python3 "$here/udp_blast.py" "${HOST_ADDR[2]}" 9002 0x00 3.5 >"$out/b1" 2>&1 &
b1=$!
wait $b0 $b1
sleep 0.5 # the queue drains (256 KiB at 100 Mb/s: 21 ms)
sw_stop
cat "$out/b0" "$out/b1" "$out/sw"
marks=$(sw_counter "$out/sw" 2 marks)
tx=$(sw_counter "$out/sw" 2 tx_frames)
qmax=$(sw_counter "$out/sw" 2 qmax)
[ "${marks:-0}" -gt 100 ] || fail "the switch marked ${marks:-0} packets"
[ "${tx:-0}" -gt 1000 ] || fail "the switch sent h2 only ${tx:-0} frames"
[ "${qmax:-0}" -gt 4096 ] || fail "the queue never passed Kmin (qmax ${qmax:-0})"
[ "$(wc -l <"$out/stats.csv")" -ge 4 ] || fail "the per-second CSV has too few rows"
# the egress clock: over the CSV's one-second intervals that start and end
# with the queue past Kmax the port is saturated; the best of them must be
# 100 Mb/s within 3% (a loaded machine's stalls only ever lower the others:
# the clock never catches up more than 1 ms)
rate=$(awk -F, '$2 == 2 { if (pq > 65536 && $10 > 65536 && $1 > pt) { r = ($7 - pb) * 8 / ($1 - pt) / 1e6; if (r > best) best = r }
                          pt = $1; pb = $7; pq = $10 }
                END { if (best) printf "%.1f", best }' "$out/stats.csv")
echo "egress rate while saturated: ${rate:-?} Mb/s (clock 100 Mb/s)"
awk -v r="${rate:-0}" 'BEGIN { exit !(r > 97 && r < 103) }' ||
  { fail "egress rate ${rate:-?} Mb/s, not 100 within 3%"; grep ',2,' "$out/stats.csv"; }
python3 "$here/pcap_ce.py" "$out/egress.pcap" 100 "${marks:-0}" 9002 || fails=$((fails + 1))
if command -v tshark >/dev/null; then
  n=$(tshark -n -r "$out/egress.pcap" -o ip.check_checksum:TRUE -Y "ip.dsfield.ecn == 3 && ip.checksum.status == 1" 2>/dev/null | wc -l)
  ce=$(tshark -n -r "$out/egress.pcap" -Y "ip.dsfield.ecn == 3" 2>/dev/null | wc -l)
  echo "tshark: $ce CE packets, $n with a good checksum"
  [ "$ce" -gt 100 ] && [ "$n" -eq "$ce" ] || fail "tshark disagrees ($ce CE, $n with a good checksum)"
fi
[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
