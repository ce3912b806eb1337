#!/usr/bin/env bash
# bench/recovery_cost.sh: what loss recovery costs each process in CPU, over
# the UDP path (SOFTRDMA_SHM=0), beside what it costs in goodput.
#
# On a host where the transport is CPU-bound (two processes, each with an
# application thread and a NIC thread, on a few cores), every cycle that
# recovery spends comes off goodput. This runs one perftest pair lossless
# and under a fault profile, interleaved (lossless, lossy, lossless, ...),
# each process under `perf stat -e task-clock,cycles` (user and kernel,
# all threads), and prints per side:
#   - goodput (the client's BW average) as lossy over lossless;
#   - CPU time per delivered byte (the process's task-clock over #bytes x
#     #iterations of the client's report), and cycles per delivered byte
#     where the machine counts cycles (a VM often does not: "-"), each as
#     lossy over lossless;
# each the median and [min..max] of the per-repetition ratios (a ratio is
# taken against the lossless figure of its own repetition), plus the
# medians of the absolute figures and of the lossy runs' SOFTRDMA_STATS
# counters that recovery drives (SACKs sent, requests kept as copies or
# placed, retransmissions), per thousand delivered packets.
# The CPU time includes process setup and teardown (registration,
# connection), the same in both profiles; -D keeps it small against the
# run. A NIC thread that spins while waiting counts too: on a host where the
# peer needs the core, that is a cost as well.
# With several builds (RC_BUILDS), every repetition runs each build's pair in
# turn, so an A/B of two builds sees the same load drift, and the table ends
# with each build's figures over the first build's, per repetition.
# A benchmark, not a test: never part of ctest.
#
#   bench/recovery_cost.sh [--quick]
# Environment:
#   RC_REPS     repetitions (5; --quick: 2)
#   RC_SECONDS  perftest -D (3; --quick: 2)
#   RC_PROG     ib_write_bw, ib_read_bw or ib_send_bw (ib_write_bw)
#   RC_SIZE     message size (65536)
#   RC_FAULT    the lossy SOFTRDMA_FAULT profile, without seed
#               (loss=0.01,reorder=0.01,dup=0.005)
#   RC_BUILDS   build directories holding lib/libibverbs.so.1 (build)
#   RC_PORT     first TCP port for the rendezvous (24000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
ab_quick "$@"
if [ "$quick" -eq 1 ]; then
  reps=${RC_REPS:-2} secs=${RC_SECONDS:-2}
else
  reps=${RC_REPS:-5} secs=${RC_SECONDS:-3}
fi
prog=${RC_PROG:-ib_write_bw}
size=${RC_SIZE:-65536}
fault=${RC_FAULT:-loss=0.01,reorder=0.01,dup=0.005}
read -r -a builds <<<"${RC_BUILDS:-$root/build}"
port=${RC_PORT:-24000}
port_end=$((port + 2000))
limit=$((secs + 15))
for b in "${builds[@]}"; do
  [ -e "$b/lib/libibverbs.so.1" ] || { echo "no $b/lib/libibverbs.so.1: build first" >&2; exit 1; }
done
for p in "$prog" perf; do
  command -v "$p" >/dev/null || { echo "missing $p" >&2; exit 1; }
done

tmp=$(mktemp -d)
raw=$tmp/raw
: >"$raw"
trap ab_cleanup EXIT
log() { echo "recovery_cost: $*" >&2; }

# perf_of FILE EVENT: the count of EVENT in a side's log, where `perf
# stat -x,` wrote its CSV to stderr (task-clock in ms), empty when not
# counted.
perf_of() { awk -F, -v e="$2" '$3 ~ "^"e && $1 ~ /^[0-9.]+$/ { print $1; exit }' "$1"; }

# run B PROFILE: one pair with build index B under PROFILE (0: lossless);
# appends "key build profile rep value" lines to $raw.
run() {
  local bi=$1 prof=$2 lib=${builds[$1]}/lib f="" tag=b$1_p$2
  [ "$prof" = 1 ] && f=$fault
  if ! ab_udp_pair "$tmp/$tag" "$limit" "$lib" "$f" perf stat -x, -e task-clock,cycles -- \
    "$prog" -F -x 0 -s "$size" -D "$secs" --report_gbits; then
    log "rep $rep build $bi profile $prof failed (client $ab_crc, server $ab_src); left out"
    return 0
  fi
  local line bytes gbps s
  line=$(awk '/#bytes/ { getline; print; exit }' "$tmp/$tag.cli")
  bytes=$(echo "$line" | awk '{ printf "%.0f", $1 * $2 }')
  gbps=$(echo "$line" | awk '{ print $4 }')
  if ! [[ $bytes =~ ^[0-9]+$ ]] || [ "$bytes" -eq 0 ]; then
    log "rep $rep build $bi profile $prof: no report; left out"
    return 0
  fi
  echo "gbps $bi $prof $rep $gbps" >>"$raw"
  local c
  for s in srv cli; do
    c=$(perf_of "$tmp/$tag.$s" task-clock)
    [ -z "$c" ] || echo "nspb_$s $bi $prof $rep $(awk -v c="$c" -v b="$bytes" \
      'BEGIN { printf "%.5f", c * 1e6 / b }')" >>"$raw"
    c=$(perf_of "$tmp/$tag.$s" cycles)
    [ -z "$c" ] || echo "cpb_$s $bi $prof $rep $(awk -v c="$c" -v b="$bytes" \
      'BEGIN { printf "%.5f", c / b }')" >>"$raw"
  done
  # recovery's counters per thousand delivered packets (of the MTU, 4096 on
  # loopback); the SACKs and kept requests are the server's, the resends the
  # client's
  local kpkts
  kpkts=$(awk -v b="$bytes" 'BEGIN { printf "%.3f", b / 4096 / 1000 }')
  for s in sacks_sent ooo_stored ooo_placed ooo_drained; do
    echo "$s $bi $prof $rep $(awk -v v="$(ab_stat "$tmp/$tag.srv" "$s")" -v k="$kpkts" \
      'BEGIN { printf "%.2f", v / k }')" >>"$raw"
  done
  echo "retransmits $bi $prof $rep $(awk -v v="$(ab_stat "$tmp/$tag.cli" retransmits)" -v k="$kpkts" \
    'BEGIN { printf "%.2f", v / k }')" >>"$raw"
}

log "$reps repetitions of $prog -s $size -D $secs, lossless and $fault, builds: ${builds[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
for ((rep = 1; rep <= reps; rep++)); do
  for bi in "${!builds[@]}"; do
    run "$bi" 0
    run "$bi" 1
  done
  log "rep $rep done ($(($(date +%s) - t0)) s)"
done

# cell: "median [min..max]" of the values on stdin
cell() {
  sort -g | awk -v f="$1" '{ a[NR] = $1 }
    END { if (!NR) { print "-"; exit }
          m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
          printf f " [" f ".." f "]\n", m, a[1], a[NR] }'
}
# vals KEY B P: the values of KEY for build B, profile P
vals() { awk -v k="$1" -v b="$2" -v p="$3" '$1 == k && $2 == b && $3 == p { print $5 }' "$raw"; }
# ratios KEY B: per repetition, lossy over lossless
ratios() {
  awk -v k="$1" -v b="$2" '$1 == k && $2 == b { v[$3, $4] = $5; r[$4] = 1 }
    END { for (i in r) if (((1, i) in v) && ((0, i) in v) && v[0, i] > 0) print v[1, i] / v[0, i] }' "$raw"
}

echo "softrdma recovery cost, UDP path, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" rev-parse --short HEAD)"
echo "$prog -s $size -D $secs, lossless against $fault; $reps repetitions (interleaved); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cells: median [min..max]; ratios are lossy over the lossless run of the same repetition; CPU time and cycles per delivered byte count user and kernel, all threads"
for bi in "${!builds[@]}"; do
  echo
  echo "build ${builds[$bi]}"
  printf '%-28s %-26s %-26s %s\n' figure lossless lossy "lossy / lossless"
  for k in gbps nspb_srv nspb_cli cpb_srv cpb_cli; do
    case $k in
    gbps) name="goodput Gb/s" f=%.2f ;;
    nspb_srv) name="server CPU ns / byte" f=%.4f ;;
    nspb_cli) name="client CPU ns / byte" f=%.4f ;;
    cpb_srv) name="server cycles / byte" f=%.3f ;;
    cpb_cli) name="client cycles / byte" f=%.3f ;;
    esac
    printf '%-28s %-26s %-26s %s\n' "$name" "$(vals $k "$bi" 0 | cell $f)" "$(vals $k "$bi" 1 | cell $f)" \
      "$(ratios $k "$bi" | cell %.3f)"
  done
  for k in sacks_sent ooo_stored ooo_placed ooo_drained retransmits; do
    printf '%-28s %-26s %s\n' "$k / 1000 pkts" "-" "$(vals $k "$bi" 1 | cell %.2f)"
  done
done
# xratios KEY B P: per repetition, build B over build 0 under profile P
xratios() {
  awk -v k="$1" -v b="$2" -v p="$3" '$1 == k && $3 == p && ($2 == b || $2 == 0) { v[$2, $4] = $5; r[$4] = 1 }
    END { for (i in r) if (((b, i) in v) && ((0, i) in v) && v[0, i] > 0) print v[b, i] / v[0, i] }' "$raw"
}
for ((bi = 1; bi < ${#builds[@]}; bi++)); do
  echo
  echo "build ${builds[$bi]} over ${builds[0]}, per repetition"
  printf '%-28s %-26s %s\n' figure lossless lossy
  for k in gbps nspb_srv nspb_cli; do
    case $k in
    gbps) name="goodput" ;;
    nspb_srv) name="server CPU ns / byte" ;;
    nspb_cli) name="client CPU ns / byte" ;;
    esac
    printf '%-28s %-26s %s\n' "$name" "$(xratios $k "$bi" 0 | cell %.3f)" "$(xratios $k "$bi" 1 | cell %.3f)"
  done
done
echo
echo "runtime $(($(date +%s) - t0)) s"
