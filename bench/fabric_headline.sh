#!/usr/bin/env bash
# bench/fabric_headline.sh: the fabric simulator's headline experiments
# (docs/FABRIC.md, "Headline experiments"). Each writes a CSV, the
# srdma-fabric summaries and a gnuplot PNG into the output directory.
#
#   bench/fabric_headline.sh ring-loss|failure|perm|all
#
#   ring-loss  ring all-reduce of RING_SIZE (4M) per host across the 1,024
#              hosts of a k = 16 fat-tree, at random loss 0, 1e-4 and 1e-3
#              per packet per link: collective completion time, retransmits,
#              timeouts (fabric-ring-loss.csv, .png)
#   failure    permutation of 16 MiB per host on a 128-host leaf-spine (8
#              leaves x 16 hosts, 8 spines, 200 Gbit/s fabric links: not
#              oversubscribed); cable leaf0-spine0 fails at 300 us and stays
#              down; delivered throughput per 10 us and the time until it is
#              back to 90% of its level before the failure
#              (fabric-failure-series.csv, fabric-failure.csv, .png)
#   perm       permutation of 16 MiB per host across the k = 16 fat-tree:
#              throughput relative to the line rate (fabric-perm.csv)
#
# Environment:
#   FAB_BIN    srdma-fabric (build/bin/srdma-fabric)
#   FAB_OUT    output directory (build/bench-fabric)
#   FAB_LABEL  name of this configuration in the CSVs (gbn-single-path)
#   FAB_EXTRA  extra srdma-fabric flags for every run: how a later engine
#              feature (path spraying, SACK, congestion control) is
#              selected, e.g. FAB_LABEL=spray FAB_EXTRA="--path-policy spray"
#              (no such flag exists yet; the engine work adds it)
#   RING_SIZE  ring message size per host (4M: one packet per chunk and step)
# One run per point: the simulation is deterministic, so a repetition gives
# the same simulated figures; only the wall and CPU times (which the CSVs
# record) vary.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/fabric_lib.sh"
bin=${FAB_BIN:-build/bin/srdma-fabric}
out=${FAB_OUT:-build/bench-fabric}
label=${FAB_LABEL:-gbn-single-path}
read -r -a extra <<<"${FAB_EXTRA:-}"
mkdir -p "$out"
have_gnuplot() { command -v gnuplot >/dev/null || { echo "gnuplot not installed: no PNG" >&2; return 1; }; }

ring_loss() {
  local size=${RING_SIZE:-4M} csv=$out/fabric-ring-loss.csv
  [ -f "$csv" ] || echo "label,loss,size,coll_us,sim_ms,retransmits,timeouts,drops,events,wall_s,cpu_s,rss_mib" >"$csv"
  for loss in 0 1e-4 1e-3; do
    local s
    s=$("$bin" --topo fat-tree --k 16 --workload ring --size "$size" --mode header \
               --loss "$loss" --until 100000 "${extra[@]}" 2>/dev/null)
    printf '%s\n' "$s" >"$out/ring-loss-$label-$loss.txt"
    local row="$label,$loss,$size,$(field "collective time" <<<"$s"),$(field "simulated time" <<<"$s")"
    row="$row,$(field_n retransmissions 1 <<<"$s"),$(field_n retransmissions 2 <<<"$s")"
    row="$row,$(field_n drops 1 <<<"$s"),$(field "packet-hop events" <<<"$s")"
    row="$row,$(field_n time 1 <<<"$s"),$(field_n time 2 <<<"$s"),$(field_n time 3 <<<"$s")"
    echo "$row" | tee -a "$csv"
  done
  have_gnuplot || return 0
  # One bar group per configuration label present in the CSV.
  local labels
  labels=$(awk -F, 'NR > 1 { print $1 }' "$csv" | awk '!seen[$0]++')
  {
    echo "set terminal pngcairo size 800,480"
    echo "set output 'fabric-ring-loss.png'"
    echo "set datafile separator ','"
    echo "set style data histograms; set style histogram clustered; set style fill solid 0.8 border -1"
    echo "set ylabel 'ring all-reduce completion time (ms)'"
    echo "set xlabel 'random loss per packet per link (1,024 hosts, fat-tree k = 16)'"
    echo "set yrange [0:*]; set grid y; set key top left"
    local first=1 cmd="plot "
    for l in $labels; do
      [ $first = 1 ] || cmd="$cmd, "
      cmd="$cmd\"< grep '^$l,' fabric-ring-loss.csv\" using (\$4/1000):xtic(2) title '$l'"
      first=0
    done
    echo "$cmd"
  } >"$out/fabric-ring-loss.gp"
  (cd "$out" && gnuplot fabric-ring-loss.gp)
}

failure() {
  local s series=$out/fabric-failure-series-$label.csv
  s=$("$bin" --topo leaf-spine --leaves 8 --hosts-per-leaf 16 --spines 8 --fabric-rate 200 \
             --workload perm --size 16M --mode header --fail leaf0:spine0@300 \
             --sample 10 --series-csv "$series" "${extra[@]}" 2>/dev/null)
  printf '%s\n' "$s" >"$out/failure-$label.txt"
  # Level before the failure: median of 100..300 us; recovered when three
  # intervals in a row are at 90% of it or more, or the flows start ending
  # (the first completion).
  local base res
  base=$(median $(awk -F, 'NR > 1 && $1 >= 100 && $1 < 300 { print $3 }' "$series"))
  res=$(awk -F, -v base="$base" 'NR > 1 { t[NR] = $1; g[NR] = $3; n = NR }
      END { lo = base; low_t = 300; rec = -1; run = 0;
            for (i = 2; i <= n; i++) { if (t[i] < 300) continue;
              if (t[i] < 1300 && g[i] < lo) { lo = g[i]; low_t = t[i] }
              if (g[i] >= 0.9 * base) { if (++run == 3 && rec < 0) rec = t[i - 2] } else run = 0 }
            printf "%.1f,%.1f,%.1f,%s", base, lo, low_t, rec < 0 ? "none" : sprintf("%.0f", rec - 300) }' "$series")
  local csv=$out/fabric-failure.csv
  [ -f "$csv" ] || echo "label,before_gbps,lowest_gbps,lowest_at_us,recovered_after_us,fct_p50_us,fct_p99_us,fct_max_us,retransmits,timeouts,drops" >"$csv"
  echo "$label,$res,$(field_n "fct p50 / p99 / max" 1 <<<"$s"),$(field_n "fct p50 / p99 / max" 2 <<<"$s"),$(field_n "fct p50 / p99 / max" 3 <<<"$s"),$(field_n retransmissions 1 <<<"$s"),$(field_n retransmissions 2 <<<"$s"),$(field_n drops 1 <<<"$s")" | tee -a "$csv"
  have_gnuplot || return 0
  cat >"$out/fabric-failure-$label.gp" <<GP
set terminal pngcairo size 800,480
set output 'fabric-failure-$label.png'
set datafile separator ','
set xlabel 'simulated time (us); leaf0-spine0 fails at 300 us'
set ylabel 'delivered throughput, all hosts (Gbit/s, per 10 us)'
set grid
set arrow from 300, graph 0 to 300, graph 1 nohead dashtype 2
plot 'fabric-failure-series-$label.csv' using 1:3 with steps title '$label'
GP
  (cd "$out" && gnuplot "fabric-failure-$label.gp")
}

perm() {
  local s csv=$out/fabric-perm.csv
  s=$("$bin" --topo fat-tree --k 16 --workload perm --size 16M --mode header \
             --links-csv "$out/perm-links-$label.csv" --flows-csv "$out/perm-flows-$label.csv" \
             "${extra[@]}" 2>/dev/null)
  printf '%s\n' "$s" >"$out/perm-$label.txt"
  [ -f "$csv" ] || echo "label,hosts,fct_p50_us,fct_p99_us,fct_max_us,ideal_us,p50_rate_ratio,aggregate_ratio,max_util,drops,retransmits,timeouts,wall_s,cpu_s" >"$csv"
  local p50 p99 mx
  p50=$(field_n "fct p50 / p99 / max" 1 <<<"$s")
  p99=$(field_n "fct p50 / p99 / max" 2 <<<"$s")
  mx=$(field_n "fct p50 / p99 / max" 3 <<<"$s")
  # Ideal: 16 MiB at the 100 Gbit/s host line rate. Aggregate: all bytes
  # over the time the last flow took, against every host at line rate.
  awk -v l="$label" -v p50="$p50" -v p99="$p99" -v mx="$mx" -v u="$(field_n "fabric link util" 1 <<<"$s")" \
      -v d="$(field_n drops 1 <<<"$s")" -v r="$(field_n retransmissions 1 <<<"$s")" \
      -v to="$(field_n retransmissions 2 <<<"$s")" -v w="$(field_n time 1 <<<"$s")" \
      -v c="$(field_n time 2 <<<"$s")" 'BEGIN { ideal = 16 * 1048576 * 8 / 100e9 * 1e6;
      printf "%s,1024,%s,%s,%s,%.1f,%.3f,%.3f,%s%%,%s,%s,%s,%s,%s\n", l, p50, p99, mx, ideal,
             ideal / p50, ideal / mx, u, d, r, to, w, c }' | tee -a "$csv"
  # Switch-to-switch links' utilisation, sorted (how unevenly ECMP spread
  # the flows), and the CDF of flow completion times.
  awk -F, 'NR > 1 && $2 !~ /^h[0-9]/ && $3 !~ /^h[0-9]/ { print $7 }' "$out/perm-links-$label.csv" |
    sort -g -r | awk '{ print NR, $1 }' >"$out/perm-util-$label.dat"
  awk -F, 'NR > 1 { print $7 / 1000 }' "$out/perm-flows-$label.csv" | sort -g |
    awk '{ v[NR] = $1 } END { for (i = 1; i <= NR; i++) print v[i], i / NR }' >"$out/perm-fct-$label.dat"
  have_gnuplot || return 0
  cat >"$out/fabric-perm-$label.gp" <<GP
set terminal pngcairo size 1000,420
set output 'fabric-perm-$label.png'
set multiplot layout 1,2
set grid
set xlabel 'fabric links, busiest first'
set ylabel 'utilisation until the last completion'
set yrange [0:1]
plot 'perm-util-$label.dat' using 1:2 with lines title '$label'
set xlabel 'flow completion time (us); ideal 1342'
set ylabel 'fraction of flows'
set yrange [0:1]
plot 'perm-fct-$label.dat' using 1:2 with lines title '$label'
unset multiplot
GP
  (cd "$out" && gnuplot "fabric-perm-$label.gp")
}

case "${1:-}" in
ring-loss) ring_loss ;;
failure) failure ;;
perm) perm ;;
all) perm; failure; ring_loss ;;
*) sed -n '2,30p' "$0"; exit 2 ;;
esac
