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
#   LOSS_BUILDS   several build directories ("dirA dirB"), for an A/B: each
#                 point runs every build in turn (the order reversed every
#                 other repetition), the table is printed per
#                 build, and the ping-pong rows end with each build's
#                 ratio to the first's, per repetition (overrides LOSS_BUILD)
#   LOSS_ONLY     pp: the ping-pong points only (no perftest)
#   LOSS_PP_N     iterations of the 64 KiB ping-pong (20; --quick: 10); at
#                 10% loss its mean is set by the slowest few, so an A/B of
#                 it wants 100 or more
#   LOSS_PORT     first TCP port for the rendezvous (23000)
#   LOSS_LOGS     directory that keeps the output of failed points
#                 (default: a new /tmp/loss-logs.XXXXXX, named in the report)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
ab_quick "$@"
read -r -a builds <<<"${LOSS_BUILDS:-${LOSS_BUILD:-$root/build}}"
only=${LOSS_ONLY:-}
case $only in '' | pp) ;; *) echo "LOSS_ONLY: pp or nothing" >&2; exit 2 ;; esac
# perftest links libmlx5 and libefa too: without the build's stand-ins
# the system's fail to load against softrdma's libibverbs
need=(libibverbs.so.1)
[ "$only" = pp ] || need+=(libmlx5.so.1 libefa.so.1)
for b in "${builds[@]}"; do
  for f in "${need[@]}"; do
    [ -e "$b/lib/$f" ] || { echo "no $b/lib/$f: build first" >&2; exit 1; }
  done
done
lib=${builds[0]}/lib
for p in ib_write_bw ib_read_bw ib_send_bw ibv_rc_pingpong; do
  command -v "$p" >/dev/null || { echo "missing $p (perftest, ibverbs-utils)" >&2; exit 1; }
done
# Ping-pong iterations are few because a lost packet that nothing follows
# waits for ibv_rc_pingpong's transport timer (timeout 14: 67 ms), which at
# 10% loss happens every few iterations.
if [ "$quick" -eq 1 ]; then
  reps=${LOSS_REPS:-1} secs=${LOSS_SECONDS:-1} pp4_n=50 pp64_n=${LOSS_PP_N:-10}
else
  reps=${LOSS_REPS:-3} secs=${LOSS_SECONDS:-1} pp4_n=100 pp64_n=${LOSS_PP_N:-20}
fi
# A point that has not finished within these many seconds counts as failed
# (left out of the medians, listed under the table): a 1 s perftest point
# normally ends within 4 s.
bw_limit=12 pp_limit=$((30 + pp64_n / 4))
port=${LOSS_PORT:-23000}
port_end=$((port + 2000))

profiles=(0 0.001 0.01 0.05 0.1)
plabel=(lossless 0.1% 1% 5% 10%)
bw_progs=(ib_write_bw ib_read_bw ib_send_bw)
[ "$only" != pp ] || bw_progs=()
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
  retx[$bi.$pi]=$((${retx[$bi.$pi]:-0} + r))
  lost[$bi.$pi]=$((${lost[$bi.$pi]:-0} + l))
}

bw_point() {
  local prog=$1 size=$2 pi=$3 tag=b${bi}_${1}_${2}_p$3 v
  run_pair "$tag" "${profiles[$pi]}" "$bw_limit" "$prog" -F -x 0 -s "$size" -D "$secs" --report_gbits ||
    return 0
  v=$(awk '/#bytes/ { getline; print $4; exit }' "$tmp/$tag.cli")
  record "$tag" "$v"
  count_repairs "$tag" "$pi"
}

pp_point() {
  local size=$1 n=$2 pi=$3 tag=b${bi}_pp_${1}_p$3 v
  run_pair "$tag" "${profiles[$pi]}" "$pp_limit" ibv_rc_pingpong -g 0 -c -s "$size" -n "$n" || return 0
  v=$(sed -n 's/.*= *\([0-9.]*\) usec\/iter.*/\1/p' "$tmp/$tag.cli" | head -n1)
  record "$tag" "$v"
  count_repairs "$tag" "$pi"
}

# the builds' indices in the order repetition $rep runs them: reversed
# every other repetition, so that neither build always goes first
border() {
  local i
  if ((rep % 2)); then
    for ((i = 0; i < ${#builds[@]}; i++)); do echo "$i"; done
  else
    for ((i = ${#builds[@]} - 1; i >= 0; i--)); do echo "$i"; done
  fi
}

log "$reps repetitions, perftest -D $secs, ping-pong -n $pp4_n (4 KiB) / $pp64_n (64 KiB); machine load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
for ((rep = 1; rep <= reps; rep++)); do
  unset retx lost
  declare -A retx lost
  for pi in "${!profiles[@]}"; do
    for prog in "${bw_progs[@]}"; do
      for size in "${bw_sizes[@]}"; do
        for bi in $(border); do lib=${builds[$bi]}/lib; bw_point "$prog" "$size" "$pi"; done
      done
    done
    for size in 4096 65536; do
      n=$pp4_n
      [ "$size" = 4096 ] || n=$pp64_n
      for bi in $(border); do lib=${builds[$bi]}/lib; pp_point "$size" "$n" "$pi"; done
    done
    for bi in "${!builds[@]}"; do
      if [ "$pi" -gt 0 ] && [ "${lost[$bi.$pi]:-0}" -gt 0 ]; then
        record "b${bi}_retx_per_lost_p$pi" "$(awk -v r="${retx[$bi.$pi]}" -v l="${lost[$bi.$pi]}" 'BEGIN { printf "%.3f", r / l }')"
        record "b${bi}_lost_p$pi" "${lost[$bi.$pi]}"
      fi
    done
  done
  log "rep $rep done ($(($(date +%s) - t0)) s)"
done

# ratios KEY PI: per repetition, KEY_pPI / KEY_p0 (lossy over lossless).
ratios() { vs "${1}_p$2" "${1}_p0"; }
# vs KEY_A KEY_B: per repetition, KEY_A / KEY_B (also one build over another).
vs() {
  awk -v a="$1" -v b="$2" '
    $1 == a { x[$2] = $3 } $1 == b { y[$2] = $3 }
    END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$raw"
}
values() { awk -v k="$1" '$1 == k { print $3 }' "$raw"; }
describe() { git -C "$1" describe --always --dirty 2>/dev/null || echo '?'; }

echo
echo "softrdma loss recovery, UDP path, $(date -u +%Y-%m-%dT%H:%MZ), commit $(describe "$root")"
echo "reps $reps (interleaved), perftest -D $secs (killed after $bw_limit s), ibv_rc_pingpong -c -n $pp4_n / $pp64_n (killed after $pp_limit s); faults: loss as shown, reorder=0.01, dup=0.005"
echo "cells: median [min..max] over repetitions; ratios are to the lossless figure of the same repetition"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
for bi in "${!builds[@]}"; do
  b=b${bi}_
  echo
  [ "${#builds[@]}" -eq 1 ] || echo "build $((bi + 1)): ${builds[$bi]} ($(describe "${builds[$bi]}"))"
  printf '%-26s %-26s' "point" "lossless"
  for pi in 1 2 3 4; do printf ' %-20s' "${plabel[$pi]}"; done
  printf ' %s\n' "target"
  for prog in "${bw_progs[@]}"; do
    for size in "${bw_sizes[@]}"; do
      lbl="${prog#ib_} $((size / 1024)) KiB / lossless"
      [ "$size" -ge 1048576 ] && lbl="${prog#ib_} $((size / 1048576)) MiB / lossless"
      printf '%-26s %-26s' "$lbl" "$(values "$b${prog}_${size}_p0" | ab_summary '%.2f') Gb/s"
      for pi in 1 2 3 4; do printf ' %-20s' "$(ratios "$b${prog}_${size}" "$pi" | ab_summary '%.3f')"; done
      printf ' %s\n' ">=0.9@1% >=0.7@5% >=0.5@10%"
    done
  done
  printf '%-26s %-26s' "pingpong 4 KiB / lossless" "$(values "${b}pp_4096_p0" | ab_summary '%.1f') us"
  for pi in 1 2 3 4; do printf ' %-20s' "$(ratios "${b}pp_4096" "$pi" | ab_summary '%.2f')"; done
  printf ' %s\n' "<=1.5@1%"
  printf '%-26s %-26s' "pingpong 64 KiB / lossless" "$(values "${b}pp_65536_p0" | ab_summary '%.1f') us"
  for pi in 1 2 3 4; do printf ' %-20s' "$(ratios "${b}pp_65536" "$pi" | ab_summary '%.2f')"; done
  printf ' %s\n' "<=10@10%"
  printf '%-26s %-26s' "retransmits / lost pkt" "-"
  for pi in 1 2 3 4; do printf ' %-20s' "$(values "${b}retx_per_lost_p$pi" | ab_summary '%.1f')"; done
  printf ' %s\n' "<=1.5"
  printf '%-26s %-26s' "lost pkts (all points)" "-"
  for pi in 1 2 3 4; do printf ' %-20s' "$(values "${b}lost_p$pi" | ab_summary '%.0f')"; done
  printf '\n'
  if [ "$bi" -gt 0 ]; then
    # usec/iter of this build over the first's, per repetition (below 1: faster)
    for size in 4096 65536; do
      printf '%-26s' "pingpong $((size / 1024)) KiB / build 1"
      for pi in 0 1 2 3 4; do
        printf ' %-20s' "$(vs "${b}pp_${size}_p$pi" "b0_pp_${size}_p$pi" | ab_summary '%.2f')"
      done
      printf ' %s\n' "(lossless, 0.1%, 1%, 5%, 10%)"
    done
  fi
done
echo
if [ -s "$tmp/failures" ]; then
  echo "failed runs (left out of the medians; their output is in $logs):"
  cat "$tmp/failures"
else
  echo "failed runs: none"
fi
echo "runtime $(($(date +%s) - t0)) s"
