#!/usr/bin/env bash
# bench/fabric_scale.sh: the cost of growing the fabric. Runs srdma-fabric's
# permutation (one 1 MiB RDMA WRITE per host, header-only, leaf-spine with
# 32 hosts per leaf and 32 spines) at 64 .. 4,096 hosts and records wall
# time, CPU time (user + system), peak RSS and packet-hop events per CPU
# second. Repetitions are interleaved (every size, and every binary when
# several are given, once per round), so load drift on a shared machine
# hits all points alike; the .dat file holds medians and the spread.
# A benchmark, not a test: never part of ctest.
#
#   bench/fabric_scale.sh [BINARY ...]     (default: build/bin/srdma-fabric)
# Environment:
#   SCALE_REPS   repetitions (3)
#   SCALE_HOSTS  host counts, multiples of 32 ("64 128 256 512 1024 2048 4096")
#   SCALE_OUT    output directory (build/bench-fabric); writes
#                fabric-scale.csv (every run), fabric-scale.dat (medians of
#                the first binary), fabric-scale.gp and fabric-scale.png
#   SCALE_SIZE   message size (1M)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/fabric_lib.sh"
reps=${SCALE_REPS:-3}
hosts=${SCALE_HOSTS:-"64 128 256 512 1024 2048 4096"}
out=${SCALE_OUT:-build/bench-fabric}
size=${SCALE_SIZE:-1M}
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(build/bin/srdma-fabric)
mkdir -p "$out"
csv=$out/fabric-scale.csv
echo "bin,hosts,rep,events,sim_ms,p50_us,p99_us,wall_s,cpu_s,rss_mib,mev_per_cpu_s,digest" >"$csv"
for rep in $(seq 1 "$reps"); do
  for h in $hosts; do
    for b in "${bins[@]}"; do
      s=$("$b" --topo leaf-spine --leaves $((h / 32)) --hosts-per-leaf 32 --spines 32 \
               --workload perm --size "$size" --mode header 2>/dev/null) || {
        echo "run failed: $b at $h hosts" >&2; exit 1; }
      ev=$(field "packet-hop events" <<<"$s")
      wall=$(field_n "time" 1 <<<"$s")
      cpu=$(field_n "time" 2 <<<"$s")
      rss=$(field_n "time" 3 <<<"$s")
      sim=$(field "simulated time" <<<"$s")
      p50=$(field_n "fct p50 / p99 / max" 1 <<<"$s")
      p99=$(field_n "fct p50 / p99 / max" 2 <<<"$s")
      dig=$(awk '/^digest/ { print $2 }' <<<"$s")
      mev=$(awk -v e="$ev" -v c="$cpu" 'BEGIN { printf "%.3f", (c > 0 ? e / c / 1e6 : 0) }')
      echo "$b,$h,$rep,$ev,$sim,$p50,$p99,$wall,$cpu,$rss,$mev,$dig" >>"$csv"
      echo "rep $rep  $h hosts  $b: $ev events, wall $wall s, cpu $cpu s, $mev M ev/cpu s, rss $rss MiB" >&2
    done
  done
done
# Medians per binary and size.
for b in "${bins[@]}"; do
  tag=$( [ "$b" = "${bins[0]}" ] && echo "" || echo ".$(basename "$b")")
  dat=$out/fabric-scale$tag.dat
  echo "# hosts runs wall_s cpu_s rss_mib events sim_ms p50_us p99_us mev_per_cpu_s cpu_spread mev_spread ($b)" >"$dat"
  for h in $hosts; do
    col() { awk -F, -v b="$b" -v h="$h" -v c="$1" '$1 == b && $2 == h { print $c }' "$csv"; }
    printf '%s %s %s %s %s %s %s %s %s %s %s %s\n' "$h" "$reps" "$(median $(col 8))" \
      "$(median $(col 9))" "$(median $(col 10))" "$(median $(col 4))" "$(median $(col 5))" \
      "$(median $(col 6))" "$(median $(col 7))" "$(median $(col 11))" "$(spread $(col 9))" \
      "$(spread $(col 11))" >>"$dat"
  done
  cat "$dat"
done
cat >"$out/fabric-scale.gp" <<'GP'
# gnuplot fabric-scale.gp: wall time, CPU time and peak RSS against hosts
# (data: fabric-scale.dat from bench/fabric_scale.sh).
set terminal pngcairo size 800,480
set output 'fabric-scale.png'
set logscale xy 2
set xlabel 'hosts (leaf-spine, permutation of 1 MiB per host, header-only)'
set ylabel 'seconds (median)'
set y2label 'peak RSS (MiB)'
set logscale y2 2
set y2tics
set key top left
set grid
plot 'fabric-scale.dat' using 1:3 with linespoints title 'wall', \
     '' using 1:4 with linespoints title 'CPU (user + system)', \
     '' using 1:5 axes x1y2 with linespoints title 'peak RSS'
GP
if command -v gnuplot >/dev/null; then
  (cd "$out" && gnuplot fabric-scale.gp) && echo "wrote $out/fabric-scale.png" >&2
else
  echo "gnuplot not installed: no PNG (scripts/deps.sh installs it)" >&2
fi
