#!/usr/bin/env bash
# bench/cc_switch.sh: congestion control through srdma-switch. N sender
# hosts (ib_write_bw -s 65536, UDP) into one receiver host, in network
# namespaces, through one egress of RATE with a BUFFER and RED ECN marking
# (Kmin = BUFFER/8, Kmax = BUFFER*3/4, Pmax 0.2), for N in CCS_SENDERS and
# each of none, dcqcn, nscc (SOFTRDMA_CC; line_rate_mbps = RATE), the
# settings interleaved per repetition. Per run: aggregate goodput over the
# bottleneck (the clients' "BW average"), Jain's fairness index over the
# senders' goodputs, the egress queue's p99 (the switch's qp99) over Kmax,
# tail drops at the egress, failed perftests. Prints the table and writes
# a CSV (and a PNG when gnuplot is installed) under bench/results/.
# DCQCN runs with its window on and parameters for this bottleneck, derived
# from a round trip measured first through the switch and from the buffer
# (bench/cc_switch_lib.sh; printed with the table). The switch runs at
# nice -20. Root only. A benchmark, not a test.
#
# Environment:
#   CCS_RATE     egress rate (1G: one softrdma sender here moves 1-1.5
#                Gb/s, so a 2G bottleneck would not be the limit)
#   CCS_BUFFER   egress buffer (256K)
#   CCS_SENDERS  sender counts ("1 2 4")
#   CCS_SECS     perftest -D (3)
#   CCS_REPS     repetitions (1)
#   CCS_BUILD    build directory (build)
#   CCS_ALGOS    the algorithms ("none dcqcn nscc")
#   CCS_DCQCN    extra dcqcn parameters (SOFTRDMA_CC syntax); "auto" (the
#                default): from the base RTT measured first through the
#                switch (ccs_dcqcn_params in bench/cc_switch_lib.sh)
#   CCS_NSCC     extra nscc parameters
#   CCS_KEEP     a directory to keep every run's perftest, softrdma
#                (SOFTRDMA_STATS=1) and switch output in
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/netns/switch_lib.sh"
. "$root/bench/cc_switch_lib.sh"
rate=${CCS_RATE:-1G}
buffer=${CCS_BUFFER:-256K}
senders=${CCS_SENDERS:-"1 2 4"}
secs=${CCS_SECS:-3}
reps=${CCS_REPS:-1}
algos=${CCS_ALGOS:-"none dcqcn nscc"}
dcqcn_extra=${CCS_DCQCN-auto}
nscc_extra=${CCS_NSCC-}
build=${CCS_BUILD:-$root/build}
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
if [ "$dcqcn_extra" = auto ]; then
  sw_start "$out/swrun" "$out/sw" --rate "$rate" --buffer "$buffer"
  rtt_us=$(ccs_base_rtt_us "$out" $port "$lib")
  wrtt_us=$(ccs_window_rtt_us "$rate_mbps" "$buf_b")
  echo "# measured base RTT ${rtt_us} us; the window's ${wrtt_us} us" >&2
  sw_stop
  port=$((port + 1))
  dcqcn_extra=$(ccs_dcqcn_params "$rtt_us" "$wrtt_us" "$rate_mbps")
  echo "# dcqcn,$dcqcn_extra" >&2
fi
echo "senders,cc,rep,goodput_gbps,goodput_over_bottleneck,jain,qp99_bytes,qp99_over_kmax,drops,marks,failed" >"$csv"

# the SOFTRDMA_CC value for one algorithm: the line rate is the bottleneck's
cc_spec() {
  case $1 in
  none) echo none ;;
  dcqcn) echo "dcqcn,line_rate_mbps=$rate_mbps${dcqcn_extra:+,$dcqcn_extra}" ;;
  nscc) echo "nscc,line_rate_mbps=$rate_mbps${nscc_extra:+,$nscc_extra}" ;;
  esac
}

one() { # one N CC REP
  local n=$1 cc=$2 rep=$3 i pids=() fails=0 g sum=0 sq=0
  sw_start "$out/swrun" "$out/sw" --rate "$rate" --buffer "$buffer" --kmin $kmin --kmax $kmax --pmax 0.2
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
  local qp99 drops marks
  qp99=$(sw_counter "$out/sw" $rx qp99)
  drops=$(sw_counter "$out/sw" $rx drops)
  marks=$(sw_counter "$out/sw" $rx marks)
  awk -v n="$n" -v cc="$cc" -v rep="$rep" -v r="$rate_mbps" -v q="${qp99:-0}" -v k=$kmax \
    -v d="${drops:-0}" -v m="${marks:-0}" -v f=$fails -v gs="${gs[*]}" 'BEGIN {
      c = split(gs, g, " "); s = 0; s2 = 0
      for (i = 1; i <= c; i++) { s += g[i]; s2 += g[i] * g[i] }
      j = s2 > 0 ? s * s / (c * s2) : 0
      printf "%d,%s,%d,%.3f,%.3f,%.3f,%d,%.2f,%d,%d,%d\n", n, cc, rep, s, s * 1000 / r, j, q, q / k, d, m, f
    }' >>"$csv"
  tail -1 "$csv" >&2
  if [ -n "${CCS_KEEP:-}" ]; then
    mkdir -p "$CCS_KEEP/$n-$cc-$rep"
    cp "$out"/sw* "$out"/cli* "$out"/srv* "$CCS_KEEP/$n-$cc-$rep/"
  fi
}

for ((rep = 1; rep <= reps; rep++)); do
  for n in $senders; do
    for cc in $algos; do
      one "$n" "$cc" "$rep"
    done
  done
done
echo "# bench/cc_switch.sh: rate $rate, buffer $buffer (Kmin $kmin, Kmax $kmax B), -D $secs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# dcqcn: ${dcqcn_extra:-defaults}${rtt_us:+ (measured base RTT $rtt_us us)}; nscc: ${nscc_extra:-defaults}"
column -s, -t "$csv"
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
set yrange [0:1.1]
plot for [c in "none dcqcn nscc"] "< grep ,".c.", $csv" using 1:5 with linespoints title c
set ylabel "Jain's fairness"
plot for [c in "none dcqcn nscc"] "< grep ,".c.", $csv" using 1:6 with linespoints title c
unset multiplot
GP
  echo "png: $png"
fi
