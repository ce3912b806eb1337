#!/usr/bin/env bash
# bench/cc_converge.sh: convergence through srdma-switch when a sender
# joins and when it leaves. Sender A (host 0) runs ib_write_bw for 3T
# seconds into the receiver (host 2); sender B (host 1) starts T seconds
# after A and runs for T seconds, so it leaves about T seconds before A
# ends. The switch (one egress of RATE, BUFFER, RED marks as
# bench/cc_switch.sh) writes its per-port counters every INTERVAL ms; from
# them bench/cc_converge.py takes each sender's rate per interval and the
# time until both are within 10% of their fair share after the join, and
# until A takes the freed capacity (90% of what the two carried together)
# after the leave. For each algorithm in CCS_ALGOS, interleaved per
# repetition. Writes bench/results/cc_converge-STAMP.csv (the times), one
# series CSV per run and a PNG (rates over time) when gnuplot is there.
# Root only. A benchmark, not a test.
#
# Environment: CCS_RATE (1G), CCS_BUFFER (4M), CCS_MTU (9000), CCS_T (3 s),
# CCS_REPS (1), CCS_INTERVAL_MS (100), CCS_ALGOS ("none dcqcn"), CCS_DCQCN
# and CCS_NSCC ("auto": derived as in bench/cc_switch.sh), CCS_BUILD
# (build). The defaults are bench/cc_switch.sh's bottleneck and settings.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/netns/switch_lib.sh"
. "$root/bench/cc_switch_lib.sh"
rate=${CCS_RATE:-1G}
buffer=${CCS_BUFFER:-4M}
export SW_MTU=${CCS_MTU:-9000}
T=${CCS_T:-3}
reps=${CCS_REPS:-1}
ival=${CCS_INTERVAL_MS:-100}
algos=${CCS_ALGOS:-"none dcqcn"}
dcqcn_extra=${CCS_DCQCN-auto}
nscc_extra=${CCS_NSCC-auto}
build=${CCS_BUILD:-$root/build}
lib=$build/lib
swbin=$build/bin/srdma-switch
[ -x "$swbin" ] && [ -e "$lib/libibverbs.so.1" ] || { echo "cc_converge: build first" >&2; exit 2; }
buf_b=$(numfmt --from=iec "$buffer")
kmin=$((buf_b / 8)) kmax=$((buf_b * 3 / 4))
rate_mbps=$(numfmt --from=si "$rate" | awk '{ print $1 / 1e6 }')
stamp=$(date -u +%Y%m%dT%H%M%SZ)
res=$root/bench/results
mkdir -p "$res"
csv=$res/cc_converge-$stamp.csv
out=$(mktemp -d)
SW_PID=
trap 'sw_stop; sw_del; rm -rf "$out"' EXIT
sw_topology 3
rx=2
ccs_swrun "$out" "$swbin"
port=$((25000 + $$ % 1000))
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
fi
cc_spec() {
  case $1 in
  none) echo none ;;
  dcqcn) echo "dcqcn,line_rate_mbps=$rate_mbps${dcqcn_extra:+,$dcqcn_extra}" ;;
  nscc) echo "nscc,line_rate_mbps=$rate_mbps${nscc_extra:+,$nscc_extra}" ;;
  esac
}
# host I ADDR CMD...: CMD in host I's namespace with softrdma over UDP
host() {
  local i=$1 a=$2
  shift 2
  ip netns exec "${HOST_NS[$i]}" env SOFTRDMA_SHM=0 SOFTRDMA_ADDR="$a" SOFTRDMA_CC="$(cc_spec "$cc")" \
    LD_LIBRARY_PATH="$lib" "$@"
}
echo "cc,rep,join_s,leave_s,converge_join_s,converge_leave_s,shared_agg_mbps,shared_jain,drops,failed" >"$csv"
series=()
for ((rep = 1; rep <= reps; rep++)); do
  for cc in $algos; do
    s_csv=$res/cc_converge-$stamp-$cc-$rep.csv
    sw_start "$out/swrun" "$out/sw" --rate "$rate" --buffer "$buffer" --kmin $kmin --kmax $kmax \
      --pmax 0.2 --stats-csv "$out/stats.csv" --stats-interval-ms "$ival"
    fails=0 pids=()
    host 2 "${HOST_ADDR[2]}" timeout $((3 * T + 30)) ib_write_bw -F -D $((3 * T)) -s 65536 \
      --report_gbits -p $port >"$out/srvA" 2>&1 &
    pids+=($!)
    host 2 "${HOST_ADDR2[2]}" timeout $((3 * T + 30)) ib_write_bw -F -D "$T" -s 65536 \
      --report_gbits -p $((port + 1)) >"$out/srvB" 2>&1 &
    pids+=($!)
    sr_wait_listen $port ip netns exec "${HOST_NS[2]}" || true
    sr_wait_listen $((port + 1)) ip netns exec "${HOST_NS[2]}" || true
    host 0 "${HOST_ADDR[0]}" timeout $((3 * T + 30)) ib_write_bw -F -D $((3 * T)) -s 65536 \
      --report_gbits -p $port "${HOST_ADDR[2]}" >"$out/cliA" 2>&1 &
    pids+=($!)
    (sleep "$T" && host 1 "${HOST_ADDR[1]}" timeout $((T + 30)) ib_write_bw -F -D "$T" -s 65536 \
      --report_gbits -p $((port + 1)) "${HOST_ADDR2[2]}" >"$out/cliB" 2>&1) &
    pids+=($!)
    for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
    sw_stop
    port=$((port + 2))
    drops=$(sw_counter "$out/sw" $rx drops)
    line=$(python3 "$root/bench/cc_converge.py" "$out/stats.csv" "$rate_mbps" "$cc" "$s_csv")
    echo "$line" | awk -F, -v r=$rep -v d="${drops:-0}" -v f=$fails \
      '{ printf "%s,%d,%s,%s,%s,%s,%s,%s,%d,%d\n", $1, r, $2, $3, $4, $5, $6, $7, d, f }' >>"$csv"
    tail -1 "$csv" >&2
    series+=("$s_csv")
  done
done
echo "# bench/cc_converge.sh: rate $rate, buffer $buffer (Kmin $kmin, Kmax $kmax B), MTU $SW_MTU, T $T s, interval $ival ms, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# dcqcn: ${dcqcn_extra:-defaults}; nscc: ${nscc_extra:-defaults}"
column -s, -t "$csv"
echo "csv: $csv"
if command -v gnuplot >/dev/null; then
  png=${csv%.csv}.png
  {
    echo "set terminal png size 900,$((250 * ${#series[@]}))"
    echo "set output '$png'"
    echo "set datafile separator ','"
    echo "set multiplot layout ${#series[@]},1"
    echo "set xlabel 'time at the switch, s'"
    echo "set ylabel 'Mb/s into the switch'"
    echo "set yrange [0:$(awk -v r="$rate_mbps" 'BEGIN { print r * 1.2 }')]"
    for s in "${series[@]}"; do
      t=$(basename "$s" .csv)
      echo "set title '${t#cc_converge-$stamp-}'"
      echo "plot '$s' every ::1 using 1:2 with lines title 'A', '' every ::1 using 1:3 with lines title 'B'"
    done
    echo "unset multiplot"
  } | gnuplot
  echo "png: $png"
fi
