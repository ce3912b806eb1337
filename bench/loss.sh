#!/usr/bin/env bash
# bench/loss.sh: softrdma's loss recovery under Debian's unmodified perftest
# and ibv_rc_pingpong, over the UDP path (SOFTRDMA_SHM=0), against the
# loss-recovery targets.
#
# Profiles: lossless, then SOFTRDMA_FAULT loss of 0.1%, 1%, 5% and 10%, each
# with reorder 1% and dup 0.5%. Faults are injected on receive (src/drivers/
# udp/fault.c), so both processes get the same profile, each with its own
# seed (and a new pair of seeds per repetition). Per profile:
#   - ib_write_bw, ib_read_bw, ib_send_bw at 64 KiB and 1 MiB (-D seconds):
#     goodput as a ratio to the lossless goodput of the same run;
#   - retransmitted packets per lost packet, from both sides' SOFTRDMA_STATS
#     lines of those runs: (retransmits_srv + retransmits_cli) /
#     (fault_lost_srv + fault_lost_cli); the repairs of reordered and
#     duplicated packets are in the numerator too, as a real network would
#     charge them;
#   - ibv_rc_pingpong -c (contents checked) at 4 KiB and 64 KiB: usec/iter
#     as a ratio to lossless.
# Repetitions are interleaved (rep 1 of every point, then rep 2, ...), so
# load drifts hit every profile alike; the table shows medians and the
# [min..max] of each ratio's repetitions (the ratio is taken per repetition
# against that repetition's lossless figure).
# A benchmark, not a test: never part of ctest.
#
#   bench/loss.sh [--quick]
# Environment:
#   LOSS_REPS     repetitions (3; --quick: 1)
#   LOSS_SECONDS  perftest -D of each bandwidth point (1)
#   LOSS_BUILD    build directory holding lib/libibverbs.so.1 (build)
#   LOSS_PORT     first TCP port for the rendezvous (23000)
#   LOSS_LOGS     directory that keeps the output of failed points
#                 (default: a new /tmp/loss-logs.XXXXXX, named in the report)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
ab_quick "$@"
build=${LOSS_BUILD:-$root/build}
lib=$build/lib
[ -e "$lib/libibverbs.so.1" ] || { echo "no $lib/libibverbs.so.1: build first" >&2; exit 1; }
for p in ib_write_bw ib_read_bw ib_send_bw ibv_rc_pingpong; do
  command -v "$p" >/dev/null || { echo "missing $p (perftest, ibverbs-utils)" >&2; exit 1; }
done
# Ping-pong iterations are few because a lost packet that nothing follows
# waits for ibv_rc_pingpong's transport timer (timeout 14: 67 ms), which at
# 10% loss happens every few iterations.
if [ "$quick" -eq 1 ]; then
  reps=${LOSS_REPS:-1} secs=${LOSS_SECONDS:-1} pp4_n=50 pp64_n=10
else
  reps=${LOSS_REPS:-3} secs=${LOSS_SECONDS:-1} pp4_n=100 pp64_n=20
fi
# A point that has not finished within these many seconds counts as failed
# (left out of the medians, listed under the table): a 1 s perftest point
# normally ends within 4 s.
bw_limit=12 pp_limit=30
port=${LOSS_PORT:-23000}
port_end=$((port + 2000))

profiles=(0 0.001 0.01 0.05 0.1)
plabel=(lossless 0.1% 1% 5% 10%)
bw_progs=(ib_write_bw ib_read_bw ib_send_bw)
bw_sizes=(65536 1048576)

tmp=$(mktemp -d)
raw=$tmp/raw
logs=${LOSS_LOGS:-}
: >"$raw"
trap ab_cleanup EXIT

log() { echo "loss: $*" >&2; }

# run_pair TAG PROFILE TIMEOUT CMD...: server "CMD -p PORT", client
# "CMD -p PORT 127.0.0.1", each with its own fault seed (none when
# lossless); outputs (stdout and the stats line on stderr) in
# $tmp/TAG.srv and $tmp/TAG.cli. Returns 1 when either side failed or was
# killed by the timeout.
run_pair() {
  local tag=$1 prof=$2 limit=$3 spec=
  shift 3
  [ "$prof" = 0 ] || spec="loss=$prof,reorder=0.01,dup=0.005"
  if ! ab_udp_pair "$tmp/$tag" "$limit" "$lib" "$spec" "$@"; then
    {
      echo "rep $rep: $tag failed (client exit $ab_crc, server $ab_src; 124: killed by timeout $limit s)"
      echo "  client: $(grep -v "softrdma: stats" "$tmp/$tag.cli" | awk 'NF' | tail -n 2 | tr '\n' '|')"
      echo "  server: $(grep -v "softrdma: stats" "$tmp/$tag.srv" | awk 'NF' | tail -n 2 | tr '\n' '|')"
    } | tee -a "$tmp/failures" >&2
    [ -n "$logs" ] || logs=$(mktemp -d /tmp/loss-logs.XXXXXX)
    mkdir -p "$logs"
    cp "$tmp/$tag.srv" "$logs/rep$rep.$tag.srv"
    cp "$tmp/$tag.cli" "$logs/rep$rep.$tag.cli"
    return 1
  fi
}

record() {
  if [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "$1 $rep $2" >>"$raw"
  else
    log "rep $rep: $1: unusable value '$2' left out"
  fi
}

# the retransmission counters of one pair, added to the profile's sums
count_repairs() {
  local tag=$1 pi=$2 s r=0 l=0
  for s in srv cli; do
    r=$((r + $(ab_stat "$tmp/$tag.$s" retransmits)))
    l=$((l + $(ab_stat "$tmp/$tag.$s" fault_lost)))
  done
  retx[$pi]=$((${retx[$pi]:-0} + r))
  lost[$pi]=$((${lost[$pi]:-0} + l))
}

bw_point() {
  local prog=$1 size=$2 pi=$3 tag=${1}_${2}_p$3 v
  run_pair "$tag" "${profiles[$pi]}" "$bw_limit" "$prog" -F -x 0 -s "$size" -D "$secs" --report_gbits ||
    return 0
  v=$(awk '/#bytes/ { getline; print $4; exit }' "$tmp/$tag.cli")
  record "$tag" "$v"
  count_repairs "$tag" "$pi"
}

pp_point() {
  local size=$1 n=$2 pi=$3 tag=pp_${1}_p$3 v
  run_pair "$tag" "${profiles[$pi]}" "$pp_limit" ibv_rc_pingpong -g 0 -c -s "$size" -n "$n" || return 0
  v=$(sed -n 's/.*= *\([0-9.]*\) usec\/iter.*/\1/p' "$tmp/$tag.cli" | head -n1)
  record "$tag" "$v"
  count_repairs "$tag" "$pi"
}

log "$reps repetitions, perftest -D $secs, ping-pong -n $pp4_n (4 KiB) / $pp64_n (64 KiB); machine load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
for ((rep = 1; rep <= reps; rep++)); do
  unset retx lost
  declare -A retx lost
  for pi in "${!profiles[@]}"; do
    for prog in "${bw_progs[@]}"; do
      for size in "${bw_sizes[@]}"; do bw_point "$prog" "$size" "$pi"; done
    done
    pp_point 4096 "$pp4_n" "$pi"
    pp_point 65536 "$pp64_n" "$pi"
    if [ "$pi" -gt 0 ] && [ "${lost[$pi]:-0}" -gt 0 ]; then
      record "retx_per_lost_p$pi" "$(awk -v r="${retx[$pi]}" -v l="${lost[$pi]}" 'BEGIN { printf "%.3f", r / l }')"
      record "lost_p$pi" "${lost[$pi]}"
    fi
  done
  log "rep $rep done ($(($(date +%s) - t0)) s)"
done

# ratios KEY PI: per repetition, KEY_pPI / KEY_p0 (lossy over lossless).
ratios() {
  awk -v a="${1}_p$2" -v b="${1}_p0" '
    $1 == a { x[$2] = $3 } $1 == b { y[$2] = $3 }
    END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$raw"
}
values() { awk -v k="$1" '$1 == k { print $3 }' "$raw"; }

echo
echo "softrdma loss recovery, UDP path, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
echo "reps $reps (interleaved), perftest -D $secs (killed after $bw_limit s), ibv_rc_pingpong -c -n $pp4_n / $pp64_n (killed after $pp_limit s); faults: loss as shown, reorder=0.01, dup=0.005"
echo "cells: median [min..max] over repetitions; ratios are to the lossless figure of the same repetition"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-26s %-26s' "point" "lossless"
for pi in 1 2 3 4; do printf ' %-20s' "${plabel[$pi]}"; done
printf ' %s\n' "target"
for prog in "${bw_progs[@]}"; do
  for size in "${bw_sizes[@]}"; do
    lbl="${prog#ib_} $((size / 1024)) KiB / lossless"
    [ "$size" -ge 1048576 ] && lbl="${prog#ib_} $((size / 1048576)) MiB / lossless"
    printf '%-26s %-26s' "$lbl" "$(values "${prog}_${size}_p0" | ab_summary '%.2f') Gb/s"
    for pi in 1 2 3 4; do printf ' %-20s' "$(ratios "${prog}_${size}" "$pi" | ab_summary '%.3f')"; done
    printf ' %s\n' ">=0.9@1% >=0.7@5% >=0.5@10%"
  done
done
printf '%-26s %-26s' "pingpong 4 KiB / lossless" "$(values pp_4096_p0 | ab_summary '%.1f') us"
for pi in 1 2 3 4; do printf ' %-20s' "$(ratios pp_4096 "$pi" | ab_summary '%.2f')"; done
printf ' %s\n' "<=1.5@1%"
printf '%-26s %-26s' "pingpong 64 KiB / lossless" "$(values pp_65536_p0 | ab_summary '%.1f') us"
for pi in 1 2 3 4; do printf ' %-20s' "$(ratios pp_65536 "$pi" | ab_summary '%.2f')"; done
printf ' %s\n' "<=10@10%"
printf '%-26s %-26s' "retransmits / lost pkt" "-"
for pi in 1 2 3 4; do printf ' %-20s' "$(values "retx_per_lost_p$pi" | ab_summary '%.1f')"; done
printf ' %s\n' "<=1.5"
printf '%-26s %-26s' "lost pkts (all points)" "-"
for pi in 1 2 3 4; do printf ' %-20s' "$(values "lost_p$pi" | ab_summary '%.0f')"; done
printf '\n'
echo
if [ -s "$tmp/failures" ]; then
  echo "failed runs (left out of the medians; their output is in $logs):"
  cat "$tmp/failures"
else
  echo "failed runs: none"
fi
echo "runtime $(($(date +%s) - t0)) s"
