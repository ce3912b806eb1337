#!/usr/bin/env bash
# bench/place_ab.sh: the responder's direct placement and SACK coalescing
# (src/engine/place.c, ooo.c) against a baseline build, under Debian's
# unmodified ib_write_bw and ib_send_bw (64 KiB, -D seconds) over the UDP
# path (SOFTRDMA_SHM=0), lossless and with SOFTRDMA_FAULT loss (each side
# its own seed, a new pair per repetition).
#
# Every repetition runs every point of both builds, alternating A and B
# point by point, so load drifts hit both alike. Per point and build: the
# median goodput over repetitions and its [min..max]; goodput as a ratio to
# the same build's lossless figure of the same repetition; B/A, the ratio
# of the two builds' goodputs of the same repetition; and, from both
# sides' SOFTRDMA_STATS lines summed over repetitions, the requests the
# responder kept as copies (ooo_stored) and placed (ooo_placed, 0 for a
# build without placement) and SACKs sent per lost packet.
# A benchmark, not a test: never part of ctest.
#
#   bench/place_ab.sh [--quick]
# Environment:
#   AB_BASE     baseline build directory (/work/base/build)
#   AB_BUILD    build under test (build)
#   AB_REPS     repetitions (3; --quick: 1)
#   AB_SECONDS  perftest -D (1)
#   AB_LOSSES   loss profiles (0 0.001 0.01 0.05)
#   AB_PORT     first TCP port for the rendezvous (26000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
ab_quick "$@"
base=${AB_BASE:-/work/base/build}
this=${AB_BUILD:-$root/build}
for b in "$base" "$this"; do
  [ -e "$b/lib/libibverbs.so.1" ] || { echo "no $b/lib/libibverbs.so.1" >&2; exit 1; }
done
reps=${AB_REPS:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
secs=${AB_SECONDS:-1}
read -r -a losses <<<"${AB_LOSSES:-0 0.001 0.01 0.05}"
progs=(ib_write_bw ib_send_bw)
port=${AB_PORT:-26000}
limit=$((secs + 12))
tmp=$(mktemp -d)
trap ab_cleanup EXIT
raw=$tmp/raw

# point BUILD_NAME BUILD_DIR PROG LOSS: one pair; appends
# "name prog loss rep gbps stored placed sacks lost" to $raw.
point() {
  local name=$1 dir=$2 prog=$3 loss=$4 spec= s
  [ "$loss" = 0 ] || spec="loss=$loss"
  if ! ab_udp_pair "$tmp/out" "$limit" "$dir/lib" "$spec" \
    "$prog" -F -x 0 -s 65536 -D "$secs" --report_gbits; then
    echo "rep $rep: $name $prog loss $loss failed (client $ab_crc, server $ab_src)" | tee -a "$tmp/failures" >&2
    return 0
  fi
  local v st=0 pl=0 sk=0 lo=0
  v=$(awk '/#bytes/ { getline; print $4; exit }' "$tmp/out.cli")
  for s in srv cli; do
    st=$((st + $(ab_stat "$tmp/out.$s" ooo_stored)))
    pl=$((pl + $(ab_stat "$tmp/out.$s" ooo_placed || true) + 0))
    sk=$((sk + $(ab_stat "$tmp/out.$s" sacks_sent)))
    lo=$((lo + $(ab_stat "$tmp/out.$s" fault_lost)))
  done
  echo "$name $prog $loss $rep $v $st $pl $sk $lo" >>"$raw"
}

echo "place A/B: A=$base B=$this, $reps reps, -D $secs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
t0=$(date +%s)
for ((rep = 1; rep <= reps; rep++)); do
  for prog in "${progs[@]}"; do
    for loss in "${losses[@]}"; do
      point A "$base" "$prog" "$loss"
      point B "$this" "$prog" "$loss"
    done
  done
  echo "rep $rep done ($(($(date +%s) - t0)) s)" >&2
done

echo "softrdma placement A/B, UDP path, 64 KiB, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
echo "A: $base   B: $this   reps $reps (interleaved A/B per point), perftest -D $secs"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cells: median [min..max] over repetitions"
echo
printf "%-12s %-6s %-4s %-26s %-26s %-26s %-10s %-10s %-12s\n" point loss build Gb/s "of lossless" B/A \
  stored placed sacks/lost
awk '
function med(a, n,   i, j, t) {
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(key,   n, i, a, lo, hi) {
  n = 0
  for (i = 1; i <= cnt[key]; i++) a[++n] = val[key, i]
  if (!n) return "n/a"
  lo = hi = a[1]
  for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
  return sprintf("%.3f [%.3f..%.3f]", med(a, n), lo, hi)
}
function put(key, v) { val[key, ++cnt[key]] = v }
{ g[$1, $2, $3, $4] = $5; st[$1, $2, $3] += $6; pl[$1, $2, $3] += $7; sk[$1, $2, $3] += $8; lo[$1, $2, $3] += $9
  progs[$2] = 1; losses[$3] = 1; reps[$4] = 1 }
END {
  for (p in progs) for (l in losses) for (r in reps) {
    if ((("A", p, l, r) in g) && (("B", p, l, r) in g) && g["A", p, l, r] > 0)
      put("ba" SUBSEP p SUBSEP l, g["B", p, l, r] / g["A", p, l, r])
    for (b = 0; b < 2; b++) {
      n = b ? "B" : "A"
      if ((n, p, l, r) in g) put("gb" SUBSEP n SUBSEP p SUBSEP l, g[n, p, l, r])
      if (((n, p, l, r) in g) && ((n, p, 0, r) in g) && g[n, p, 0, r] > 0)
        put("rl" SUBSEP n SUBSEP p SUBSEP l, g[n, p, l, r] / g[n, p, 0, r])
    }
  }
  for (p in progs) for (l in losses) for (b = 0; b < 2; b++) {
    n = b ? "B" : "A"
    printf "%-12s %-6s %-4s %-26s %-26s %-26s %-10d %-10d %-12s\n", p, l, n,
      cell("gb" SUBSEP n SUBSEP p SUBSEP l), l == 0 ? "-" : cell("rl" SUBSEP n SUBSEP p SUBSEP l),
      b ? cell("ba" SUBSEP p SUBSEP l) : "-", st[n, p, l], pl[n, p, l],
      lo[n, p, l] ? sprintf("%.2f", sk[n, p, l] / lo[n, p, l]) : "-"
  }
}' "$raw" | sort -k1,1 -k2,2n -k3,3
echo
if [ -s "$tmp/failures" ]; then echo "failed runs:"; cat "$tmp/failures"; else echo "failed runs: none"; fi
echo "runtime $(($(date +%s) - t0)) s"
