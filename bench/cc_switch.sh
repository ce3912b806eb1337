#!/usr/bin/env bash
# bench/cc_switch.sh: congestion control through srdma-switch (issue #23,
# experiment (a)). N sender hosts (ib_write_bw -s 65536, UDP) into one
# receiver host, in network namespaces, through one egress of RATE with a
# BUFFER and RED ECN marking (Kmin = BUFFER/8, Kmax = BUFFER*3/4, Pmax
# 0.2), for N in CCS_SENDERS and each of CCS_ALGOS, interleaved per
# repetition:
#   cap    no congestion control, no rate limit and a 4 MiB buffer: what
#          the hosts and the switch move at this N in this run, the peer
#          the bottleneck is judged against (cap / bottleneck < 1 means
#          the hosts, not the bottleneck, were the limit);
#   none, dcqcn, nscc   SOFTRDMA_CC with line_rate_mbps = RATE.
# Per run, from the switch's stats CSV (100 ms intervals) over the window
# in which every sender was running (bench/cc_switch_win.py; perftest's
# own averages cover each sender's -D from its own start, and on a loaded
# host the starts are hundreds of ms apart): the egress rate over the
# bottleneck and Jain's index over the senders' rates; then the egress
# queue's p99 (the switch's qp99) over Kmax, tail drops, marks, failed
# perftests, the clients' summed "BW average" as perftest reports it, and
# lost_ms, the link time the egress lost with frames waiting (the switch
# descheduled past its 20 ms catch-up: the bottleneck ran below its rate).
# The table marks each issue #23 target met (Y) or not (n): egress >= 0.9
# x bottleneck, Jain >= 0.95, queue p99 <= Kmax, 0 drops. Writes a CSV
# (and a PNG when gnuplot is installed) under bench/results/. The switch
# runs at nice -20. Root only. A benchmark, not a test.
#
# The defaults are the run to make (about 10 minutes): jumbo links (MTU
# 9000, so softrdma's path MTU is 4096 and a byte costs a quarter of the
# frames it costs at 1500), a 1 Gb/s bottleneck (half of what one sender
# moves through the switch on a quiet machine at that MTU; the cap rows
# say whether it held), a 4 MiB buffer (34 ms at 1 Gb/s, four of the
# 8 ms round trips ib_write_lat measures through the switch: with 2 cores
# running up to 16 perftest processes and the switch, a sender waits 10 to
# 20 ms for its turn, and only a queue that outlasts that wait keeps the
# link busy; 1 MiB left it idle 40% of the time at 8 senders), 1, 2, 4 and
# 8 senders, -D 6, 3 repetitions.
# DCQCN's parameters are derived from a round trip measured first and
# from the buffer (ccs_dcqcn_params in bench/cc_switch_lib.sh) and
# printed with the table.
#
# Environment:
#   CCS_RATE     egress rate (1G)
#   CCS_BUFFER   egress buffer (4M)
#   CCS_MTU      every veth's MTU (9000; 1500 gives softrdma 1 KiB packets)
#   CCS_SENDERS  sender counts ("1 2 4 8")
#   CCS_SECS     perftest -D (6: on a loaded host 8 senders start up to
#                2 s apart, and the window is the time all of them ran)
#   CCS_REPS     repetitions (3)
#   CCS_BUILD    build directory (build)
#   CCS_ALGOS    the rows ("cap none dcqcn nscc")
#   CCS_DCQCN    extra dcqcn parameters (SOFTRDMA_CC syntax); "auto" (the
#                default): derived (ccs_dcqcn_params)
#   CCS_DCQCN_WSCALE  the derived window's base RTT times this (1); above 1
#                with wnd_ss (bench/cc_switch_lib.sh)
#   CCS_NSCC     extra nscc parameters; "auto" (the default): derived
#                (ccs_nscc_params)
#   CCS_KEEP     a directory to keep every run's perftest, softrdma
#                (SOFTRDMA_STATS=1) and switch output (its stats CSV too) in
#   CCS_STATS_MS the switch's stats interval in ms (100); 1 to 10 show the
#                queue's idle gaps
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/netns/switch_lib.sh"
. "$root/bench/cc_switch_lib.sh"
rate=${CCS_RATE:-1G}
buffer=${CCS_BUFFER:-4M}
export SW_MTU=${CCS_MTU:-9000}
senders=${CCS_SENDERS:-"1 2 4 8"}
secs=${CCS_SECS:-6}
reps=${CCS_REPS:-3}
algos=${CCS_ALGOS:-"cap none dcqcn nscc"}
dcqcn_extra=${CCS_DCQCN-auto}
nscc_extra=${CCS_NSCC-auto}
build=${CCS_BUILD:-$root/build}
stats_ms=${CCS_STATS_MS:-100}
lib=$build/lib
swbin=$build/bin/srdma-switch
[ -x "$swbin" ] && [ -e "$lib/libibverbs.so.1" ] || { echo "cc_switch: build first" >&2; exit 2; }
tobytes() { numfmt --from=iec "$1"; }
buf_b=$(tobytes "$buffer")
kmin=$((buf_b / 8)) kmax=$((buf_b * 3 / 4))
rate_mbps=$(numfmt --from=si "$rate" | awk '{ print $1 / 1e6 }')
maxn=0
for n in $senders; do [ "$n" -gt $maxn ] && maxn=$n; done
stamp=$(date -u +%Y%m%dT%H%M%SZ)
csv=$root/bench/results/cc_switch-$stamp.csv
mkdir -p "$root/bench/results"
out=$(mktemp -d)
SW_PID=
trap 'sw_stop; sw_del; rm -rf "$out"' EXIT
sw_topology $((maxn + 1))
ccs_swrun "$out" "$swbin"
rx=$maxn # the receiver host: the last one
port=$((24000 + $$ % 1000))
rtt_us=
if [ "$dcqcn_extra" = auto ] || [ "$nscc_extra" = auto ]; then
  sw_start "$out/swrun" "$out/sw" --rate "$rate" --buffer "$buffer"
  rtt_us=$(ccs_base_rtt_us "$out" $port "$lib")
  sw_stop
  port=$((port + 1))
fi
wrtt_us=$(ccs_window_rtt_us "$rate_mbps" "$buf_b")
if [ "$dcqcn_extra" = auto ]; then
  dcqcn_extra=$(ccs_dcqcn_params "$rtt_us" "$wrtt_us" "$rate_mbps")
  ccs_dcqcn_explain "$rtt_us" "$wrtt_us" "$rate_mbps" "$buffer" >&2
fi
if [ "$nscc_extra" = auto ]; then
  nscc_extra=$(ccs_nscc_params "$rtt_us" "$wrtt_us" "$rate_mbps" "$SW_MTU")
  ccs_nscc_explain "$rtt_us" "$wrtt_us" "$SW_MTU" >&2
fi
echo "senders,cc,rep,window_s,egress_over_bottleneck,jain,qp99_over_kmax,drops,marks,failed,perftest_gbps,perftest_jain,lost_ms,met" >"$csv"

# the SOFTRDMA_CC value for one algorithm: the line rate is the bottleneck's
cc_spec() {
  case $1 in
  none | cap) echo none ;;
  dcqcn) echo "dcqcn,line_rate_mbps=$rate_mbps${dcqcn_extra:+,$dcqcn_extra}" ;;
  nscc) echo "nscc,line_rate_mbps=$rate_mbps${nscc_extra:+,$nscc_extra}" ;;
  esac
}

one() { # one N CC REP
  local n=$1 cc=$2 rep=$3 i pids=() fails=0 g
  if [ "$cc" = cap ]; then
    sw_start "$out/swrun" "$out/sw" --buffer 4M --stats-csv "$out/stats.csv" --stats-interval-ms "$stats_ms"
  else
    sw_start "$out/swrun" "$out/sw" --rate "$rate" --buffer "$buffer" --kmin $kmin --kmax $kmax \
      --pmax 0.2 --stats-csv "$out/stats.csv" --stats-interval-ms "$stats_ms"
  fi
  for ((i = 0; i < n; i++)); do
    ip -n "${HOST_NS[$rx]}" addr add "10.236.0.$((200 + i))/24" dev eth0 2>/dev/null || true
    ip netns exec "${HOST_NS[$rx]}" env SOFTRDMA_SHM=0 SOFTRDMA_STATS=1 SOFTRDMA_ADDR=10.236.0.$((200 + i)) \
      SOFTRDMA_CC="$(cc_spec "$cc")" LD_LIBRARY_PATH="$lib" \
      timeout $((secs + 30)) ib_write_bw -F -D "$secs" -s 65536 --report_gbits -p $((port + i)) \
      >"$out/srv$i" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < n; i++)); do
    sr_wait_listen $((port + i)) ip netns exec "${HOST_NS[$rx]}" || true
  done
  for ((i = 0; i < n; i++)); do
    ip netns exec "${HOST_NS[$i]}" env SOFTRDMA_SHM=0 SOFTRDMA_STATS=1 SOFTRDMA_ADDR="${HOST_ADDR[$i]}" \
      SOFTRDMA_CC="$(cc_spec "$cc")" LD_LIBRARY_PATH="$lib" \
      timeout $((secs + 30)) ib_write_bw -F -D "$secs" -s 65536 --report_gbits -p $((port + i)) \
      10.236.0.$((200 + i)) >"$out/cli$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
  sw_stop
  port=$((port + n))
  local gs=()
  for ((i = 0; i < n; i++)); do
    g=$(awk '$1 == 65536 { print $4 }' "$out/cli$i")
    gs+=("${g:-0}")
  done
  local qp99 drops marks win lost
  qp99=$(sw_counter "$out/sw" $rx qp99)
  drops=$(sw_counter "$out/sw" $rx drops)
  marks=$(sw_counter "$out/sw" $rx marks)
  win=$(python3 "$root/bench/cc_switch_win.py" "$out/stats.csv" "$n" "$rate_mbps")
  # link time the egress lost with frames waiting (the switch descheduled)
  lost=$(sed -n "s/^port $rx .* lost_ms=\([0-9.]*\).*/\1/p" "$out/sw")
  awk -v n="$n" -v cc="$cc" -v rep="$rep" -v r="$rate_mbps" -v q="${qp99:-0}" -v k=$kmax \
    -v d="${drops:-0}" -v m="${marks:-0}" -v f=$fails -v gs="${gs[*]}" -v win="$win" -v lost="${lost:-0}" 'BEGIN {
      c = split(gs, g, " "); s = 0; s2 = 0
      for (i = 1; i <= c; i++) { s += g[i]; s2 += g[i] * g[i] }
      pj = s2 > 0 ? s * s / (c * s2) : 0
      split(win, w, ",")
      eg = w[2] / r; qk = q / k
      # the targets of issue #23 (a): goodput, fairness, queue, drops
      met = (eg >= 0.9 ? "Y" : "n") (w[3] >= 0.95 ? "Y" : "n") (qk <= 1 ? "Y" : "n") (d == 0 ? "Y" : "n")
      if (cc == "cap") { qk = 0; met = "-" }
      printf "%d,%s,%d,%.1f,%.3f,%.3f,%.2f,%d,%d,%d,%.3f,%.3f,%.1f,%s\n", n, cc, rep, w[1], eg, w[3], qk, d, m, f, s, pj, lost, met
    }' >>"$csv"
  tail -1 "$csv" >&2
  if [ -n "${CCS_KEEP:-}" ]; then
    mkdir -p "$CCS_KEEP/$n-$cc-$rep"
    cp "$out"/sw* "$out"/cli* "$out"/srv* "$out"/stats.csv "$CCS_KEEP/$n-$cc-$rep/"
  fi
}

for ((rep = 1; rep <= reps; rep++)); do
  for n in $senders; do
    for cc in $algos; do
      one "$n" "$cc" "$rep"
    done
  done
done
echo "# bench/cc_switch.sh: rate $rate, buffer $buffer (Kmin $kmin, Kmax $kmax B), MTU $SW_MTU, -D $secs, $reps repetitions, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# dcqcn: ${dcqcn_extra:-defaults}${rtt_us:+ (measured base RTT $rtt_us us)}; nscc: ${nscc_extra:-defaults}"
echo "# cap: no cc, no rate limit (egress_over_bottleneck is what the hosts moved / RATE)"
echo "# met: egress >= 0.9 x bottleneck, Jain >= 0.95, queue p99 <= Kmax, 0 drops (Y/n each)"
column -s, -t "$csv"
# medians over the repetitions
awk -F, 'NR > 1 { k = $1 "," $2; n[k]++; e[k, n[k]] = $5; j[k, n[k]] = $6; q[k, n[k]] = $7; d[k, n[k]] = $8
    if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
  function med(a, k, c,   i, x, y, t, v) {
    for (i = 1; i <= c; i++) v[i] = a[k, i]
    for (x = 1; x <= c; x++) for (y = x + 1; y <= c; y++) if (v[y] < v[x]) { t = v[x]; v[x] = v[y]; v[y] = t }
    return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2 }
  END { print "# medians: senders cc egress/bottleneck jain qp99/kmax drops met"
    for (i = 1; i <= m; i++) { k = order[i]; c = n[k]; split(k, kk, ",")
      eg = med(e, k, c); ja = med(j, k, c); qq = med(q, k, c); dd = med(d, k, c)
      mt = kk[2] == "cap" ? "-" : (eg >= 0.9 ? "Y" : "n") (ja >= 0.95 ? "Y" : "n") (qq <= 1 ? "Y" : "n") (dd == 0 ? "Y" : "n")
      printf "# %s %s %.3f %.3f %.2f %d %s\n", kk[1], kk[2], eg, ja, qq, dd, mt } }' "$csv"
echo "csv: $csv"
if command -v gnuplot >/dev/null; then
  png=${csv%.csv}.png
  gnuplot <<GP
set terminal png size 900,400
set output "$png"
set datafile separator ","
set multiplot layout 1,2
set key left bottom
set xlabel "senders"
set ylabel "goodput / bottleneck"
set yrange [0:*]
plot for [c in "cap none dcqcn nscc"] "< grep ,".c.", $csv" using 1:5 with points title c
set ylabel "Jain's fairness"
plot for [c in "none dcqcn nscc"] "< grep ,".c.", $csv" using 1:6 with points title c
unset multiplot
GP
  echo "png: $png"
fi
