#!/bin/sh
# bench/cc_switch.sh's bottleneck in the fabric simulator (docs/CONGESTION.md,
# "Measured"): senders into one 1 Gbit/s port with a 1 MiB buffer and RED
# from 128 KiB to 768 KiB, DCQCN with the parameters the bench derives
# (a window of 2 x Rc x 524 us: 128 KiB at the line rate). Deterministic
# (simulated time); the counters are asserted:
#  - quiet hosts, 4 senders: issue #23's targets (goodput >= 0.9 of the
#    port, Jain >= 0.95, queue p99 <= Kmax, no drop);
#  - hosts that run every 2 ms (--link-delay h:leaf0=40/2000 on every
#    host): one window-limited sender moves its window per round trip
#    (about 4 ms: 128 KiB / 4 ms = 0.26 of the port), and with wnd_ss and
#    twice the base RTT twice that; the same run twice is the same run;
#  - a hold on a switch port, or a malformed --link-delay, is refused.
bin=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
dq=dcqcn,line_rate_mbps=1000,bdp_mult=2,base_rtt_us=524,cnp_interval_us=160,decrease_interval_us=160
dq=$dq,alpha_timer_us=176,rate_timer_us=176,rai_mbps=5,rhai_mbps=50,pace_line=1,pace_burst=65536
run() { # tag senders cc hold_us -> "goodput jain qp99 drops" after 50 ms
  tag=$1 n=$2 cc=$3 hold=$4
  ld=""
  if [ "$hold" -gt 0 ]; then
    i=0
    while [ $i -le "$n" ]; do ld="$ld --link-delay h$i:leaf0=40/$hold"; i=$((i + 1)); done
  fi
  # shellcheck disable=SC2086
  "$bin" --leaves 1 --spines 1 --hosts-per-leaf $((n + 1)) --host-rate 1 --host-delay 40000 \
    --buffer 1M --kmin 131072 --kmax 786432 --pmax 0.2 --workload incast --incast-n "$n" \
    --incast-dst "$n" --size 1G --mode header --sack --mtu 4096 --window 2048 --timeout 14 \
    --cc "$cc" --until 250 --sample 1000 --queue-csv "$tmp/q_$tag.csv" \
    --hosts-csv "$tmp/h_$tag.csv" $ld >"$tmp/out_$tag" 2>&1
  grep -q '^digest' "$tmp/out_$tag" || { cat "$tmp/out_$tag"; echo "run $tag did not finish" >&2; exit 1; }
  awk -F, -v n="$n" 'FNR == 1 { f++; next }
    f == 1 && $1 >= 50000 { b[$2] += $5; if ($1 > t) t = $1 }
    f == 2 && $1 >= 50000 { q[++c] = $2 + 0 }
    END { s = 0; s2 = 0; for (h in b) { s += b[h]; s2 += b[h] * b[h] }
      span = (t - 50000 + 1000) * 1e3; g = s * 8 / span
      j = s2 > 0 ? s * s / (n * s2) : 0
      for (x = 1; x <= c; x++) for (y = x + 1; y <= c; y++) if (q[y] < q[x]) { z = q[x]; q[x] = q[y]; q[y] = z }
      printf "%.3f %.3f %d\n", g, j, q[int(c * 0.99)] }' "$tmp/h_$tag.csv" "$tmp/q_$tag.csv"
}
drops() { sed -n 's/^drops *\([0-9]*\).*/\1/p' "$tmp/out_$1"; }
fail=0
set -- $(run q4 4 "$dq" 0)
echo "quiet, 4 senders: goodput $1, Jain $2, queue p99 $3 B, drops $(drops q4)"
awk -v g="$1" -v j="$2" -v q="$3" 'BEGIN { exit !(g >= 0.9 && j >= 0.95 && q <= 786432) }' ||
  { echo "  FAIL: a target missed"; fail=1; }
[ "$(drops q4)" -eq 0 ] || { echo "  FAIL: drops"; fail=1; }
set -- $(run h1 1 "$dq" 2000)
g1=$1
echo "hosts every 2 ms, 1 sender: goodput $g1, drops $(drops h1)"
awk -v g="$g1" 'BEGIN { exit !(g > 0.2 && g < 0.35) }' ||
  { echo "  FAIL: want the window's bound, 128 KiB per 4 ms round trip"; fail=1; }
set -- $(run h1ss 1 "$dq,base_rtt_us=1048,wnd_ss=1" 2000)
echo "  with wnd_ss and a 1048 us base RTT: goodput $1"
awk -v g="$1" -v a="$g1" 'BEGIN { exit !(g > 1.8 * a) }' || { echo "  FAIL: want twice the window's bound"; fail=1; }
set -- $(run h1b 1 "$dq" 2000)
d1=$(sed -n 's/^digest *//p' "$tmp/out_h1") d2=$(sed -n 's/^digest *//p' "$tmp/out_h1b")
echo "  the same run twice: digests $d1 $d2"
[ "$d1" = "$d2" ] || { echo "  FAIL: not deterministic"; fail=1; }
"$bin" --leaves 1 --spines 1 --hosts-per-leaf 3 --link-delay leaf0:h0=1/5 >/dev/null 2>&1
[ $? -eq 2 ] || { echo "  FAIL: a hold on a switch port was taken"; fail=1; }
"$bin" --leaves 1 --spines 1 --hosts-per-leaf 3 --link-delay h0:leaf0 >/dev/null 2>&1
[ $? -eq 2 ] || { echo "  FAIL: a malformed --link-delay was taken"; fail=1; }
exit $fail
