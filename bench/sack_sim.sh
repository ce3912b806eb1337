#!/usr/bin/env bash
# bench/sack_sim.sh: go-back-N against selective recovery (docs/WIRE.md) in
# the deterministic simulator (tools/srdma-sim: two real engines, one
# 10 Gb/s link with 2 us each way, seeded faults, simulated time), so the
# figures do not depend on the machine's load. Per loss rate (0 to 10%,
# each with 1% reordering and 0.5% duplication, as bench/loss.sh): goodput
# of 64 KiB and 1 MiB RDMA WRITEs (128 in flight) as a ratio to the
# goodput of the same mode on a fault-free link (the first column, Gb/s),
# and retransmitted packets per lost packet (losses in both directions
# counted, ACKs included). Medians over seeds 1..SIM_SEEDS. Modes: gbn
# (go-back-N), sack (selective recovery, the default between softrdma
# peers), qcap (sack with the queue cap, SOFTRDMA_QDELAY_US=1000).
# A benchmark, not a test: never part of ctest.
#
#   bench/sack_sim.sh            (SIM_SEEDS=3, SIM_BUILD=build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sim=${SIM_BUILD:-$root/build}/bin/srdma-sim
[ -x "$sim" ] || { echo "no $sim: build first" >&2; exit 1; }
seeds=${SIM_SEEDS:-3}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# run MODE SIZE COUNT LOSS SEED [REORDER DUP]: "goodput_gbps retransmits lost"
run() {
  local flag=""
  [ "$1" = sack ] && flag=--sack
  [ "$1" = qcap ] && flag="--sack --qdelay-us 1000"
  "$sim" --op write --size "$2" --count "$3" --depth 128 --loss "$4" --reorder "${6:-0.01}" \
    --dup "${7:-0.005}" --timeout 14 --seed "$5" $flag |
    awk '/goodput/ {g=$2} /retransmissions/ {r=$2} /faults injected/ {gsub(",", "", $4); l=$4}
         END {print g, r, l}'
}
echo "softrdma selective recovery, simulated: 10 Gb/s, 2 us one-way, reorder 1%, dup 0.5%, WRITE, 128 in flight; medians of $seeds seeds, commit $(git -C "$root" rev-parse --short HEAD)"
printf '%-22s %-10s %-10s %-10s %-10s %-10s %-10s\n' point fault-free 0% 0.1% 1% 5% 10%
for size in 64K 1M; do
  count=2000
  [ "$size" = 1M ] && count=150
  for mode in gbn sack qcap; do
    base=$(for s in $(seq 1 "$seeds"); do run $mode $size $count 0 "$s" 0 0 | awk '{print $1}'; done | median)
    line=$(printf '%-22s %-10s' "$mode $size Gb/s,ratio" "$base")
    rline=$(printf '%-22s %-10s' "$mode $size rexmit/lost" "-")
    for loss in 0 0.001 0.01 0.05 0.1; do
      r=$(for s in $(seq 1 "$seeds"); do run $mode $size $count $loss "$s"; done)
      g=$(echo "$r" | awk -v b="$base" '{print $1 / b}' | median)
      x=$(echo "$r" | awk '{print ($3 ? $2 / $3 : "-")}' | median)
      line+=$(printf ' %-10.3f' "$g")
      rline+=$(printf ' %-10s' "$x")
    done
    echo "$line"
    echo "$rline"
  done
done
