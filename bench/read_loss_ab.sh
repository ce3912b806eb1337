#!/usr/bin/env bash
# bench/read_loss_ab.sh: RDMA READ goodput under loss, this build against a
# baseline build, over the UDP path (SOFTRDMA_SHM=0), with Debian's
# unmodified ib_read_bw (64 KiB and 1 MiB, -D seconds) and, load-free,
# the deterministic simulator (tools/srdma-sim --op read, same sizes).
#
# Faults as bench/loss.sh: SOFTRDMA_FAULT loss=X,reorder=0.01,dup=0.005 on
# receive in both processes (each its own seed). Every repetition runs
# every (build, size, loss) point once, builds interleaved, so load drifts
# hit both alike. Per point: the median and [min..max] of the goodput
# ratio to the lossless goodput of the same build and repetition, and the
# median ratio of this build's goodput to the baseline's. The simulator's
# figures (simulated time: no load dependence) follow as they came out.
# A benchmark, not a test: never part of ctest.
#
#   bench/read_loss_ab.sh [--quick]
# Environment:
#   AB_NEW     build directory under test (build)
#   AB_BASE    baseline build directory (/work/base/build)
#   AB_REPS    repetitions (3; --quick: 1)
#   AB_SECONDS ib_read_bw -D of each point (1)
#   AB_LOSSES  loss probabilities ("0 0.01 0.05 0.1")
#   AB_PORT    first TCP port for the rendezvous (26000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
ab_quick "$@"
new=${AB_NEW:-$root/build}
base=${AB_BASE:-/work/base/build}
reps=${AB_REPS:-$([ "$quick" -eq 1 ] && echo 1 || echo 3)}
secs=${AB_SECONDS:-1}
losses=(${AB_LOSSES:-0 0.01 0.05 0.1})
sizes=(65536 1048576)
port=${AB_PORT:-26000}
for b in "$new" "$base"; do
  [ -e "$b/lib/libibverbs.so.1" ] || { echo "no $b/lib/libibverbs.so.1" >&2; exit 1; }
done
command -v ib_read_bw >/dev/null || { echo "missing ib_read_bw (perftest)" >&2; exit 1; }
[ "${losses[0]}" = 0 ] || { echo "AB_LOSSES must start with 0 (the lossless reference)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/read-ab.XXXXXX)
trap ab_cleanup EXIT
raw=$tmp/raw

# point BUILDTAG BUILD SIZE LOSS: one ib_read_bw pair; appends
# "BUILDTAG SIZE LOSS REP GBITS" to $raw (nothing when it failed).
point() {
  local tag=$1 b=$2 size=$3 loss=$4 spec= v
  [ "$loss" = 0 ] || spec="loss=$loss,reorder=0.01,dup=0.005"
  ab_udp_pair "$tmp/out" 15 "$b/lib" "$spec" ib_read_bw -F -x 0 -s "$size" -D "$secs" --report_gbits || true
  v=$(awk '/#bytes/ { getline; print $4; exit }' "$tmp/out.cli")
  if [ "$ab_crc" -eq 0 ] && [[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "$tag $size $loss $rep $v" >>"$raw"
  else
    echo "rep $rep: $tag $size loss $loss failed (exit $ab_crc)" >&2
  fi
}

echo "READ goodput under loss: $(git -C "$root" rev-parse --short HEAD) ($new) against $base"
echo "$(date -u +%FT%TZ), reps $reps, ib_read_bw -D $secs, faults loss=X,reorder=0.01,dup=0.005, load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((rep = 1; rep <= reps; rep++)); do
  for size in "${sizes[@]}"; do
    for loss in "${losses[@]}"; do
      point new "$new" "$size" "$loss"
      point base "$base" "$size" "$loss"
    done
  done
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"

# median and [min..max] of the numbers on stdin
stats() { ab_summary %.3f | tr -d '\n'; }
# per repetition: TAG's goodput at SIZE LOSS over its lossless goodput
ratio_lossless() {
  awk -v t="$1" -v s="$2" -v l="$3" '$1 == t && $2 == s && $3 == l { x[$4] = $5 }
    $1 == t && $2 == s && $3 == 0 { y[$4] = $5 }
    END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$raw"
}
ratio_base() {
  awk -v s="$1" -v l="$2" '$2 == s && $3 == l && $1 == "new" { x[$4] = $5 }
    $2 == s && $3 == l && $1 == "base" { y[$4] = $5 }
    END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$raw"
}
gbits() { awk -v t="$1" -v s="$2" '$1 == t && $2 == s && $3 == 0 { print $5 }' "$raw"; }
echo
for size in "${sizes[@]}"; do
  echo "lossless $size: new $(gbits new "$size" | stats) Gb/s, base $(gbits base "$size" | stats) Gb/s"
done
printf "\n%-9s %-6s %-26s %-26s %s\n" size loss "new / lossless" "base / lossless" "new / base"
for size in "${sizes[@]}"; do
  for loss in "${losses[@]}"; do
    printf "%-9s %-6s %-26s %-26s %s\n" "$size" "$loss" \
      "$(ratio_lossless new "$size" "$loss" | stats)" "$(ratio_lossless base "$size" "$loss" | stats)" \
      "$(ratio_base "$size" "$loss" | stats)"
  done
done

echo
echo "srdma-sim --op read --depth 16 --timeout 14 --sack, reorder 0.01, dup 0.005 (simulated time):"
printf "%-9s %-6s %-14s %-14s\n" size loss "new Gb/s" "base Gb/s"
for size in 64K 1M; do
  count=$([ "$size" = 64K ] && echo 1000 || echo 100)
  for loss in "${losses[@]}"; do
    g=()
    for b in "$new" "$base"; do
      g+=("$(timeout 300 "$b/bin/srdma-sim" --op read --size "$size" --count "$count" --depth 16 \
        --loss "$loss" --reorder 0.01 --dup 0.005 --timeout 14 --sack 2>&1 |
        awk '/goodput/ { print $2; exit }')")
    done
    printf "%-9s %-6s %-14s %-14s\n" "$size" "$loss" "${g[0]:-n/a}" "${g[1]:-n/a}"
  done
done
