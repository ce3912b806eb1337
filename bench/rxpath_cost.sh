#!/usr/bin/env bash
# bench/rxpath_cost.sh: where the CPU of the out-of-order path goes on the
# UDP path (SOFTRDMA_SHM=0), per thread and per stage, against the in-order
# path of the same build in the same run.
#
# One perftest pair per fault profile (lossless, reordering only, loss
# only, the 1% mix of bench/loss.sh; interleaved over RX_REPS
# repetitions), each process under `perf record --call-graph dwarf`
# (cpu-clock samples, user and kernel, all threads). Figures are CPU
# microseconds per message (samples / frequency over the client's
# iterations), so they compare across profiles whose goodput differs:
#   - each process's threads: the one that does most of its work (the
#     server's NIC thread; the client's application thread, which sends
#     inline and runs the NIC inline whenever a poll of its CQ is empty)
#     and the rest;
#   - the server's stages, inclusive: the NIC pass, the engine's receive
#     (sr_engine_rx_ecn), the out-of-order store (sr_ooo_store, which
#     places and sends SACKs), the drain (sr_ooo_drain, the in-order run of
#     what was kept), SACK generation (sr_ooo_send_sack), the sends
#     (sendmmsg) and receives (recvmmsg) in the kernel;
#   - the client's recvmmsg and sendmmsg, its SACK processing (sr_sack_rx),
#     its READ responses past a hole (sr_readsel_rx) and, for an
#     ib_send_bw or ib_read_bw pair, its own store and drain;
#   - the server's SACKs sent and the client's ACK/SACK receive count per
#     1000 data packets (SOFTRDMA_STATS).
# Cells: median [min..max] over the repetitions. With several builds
# (RX_BUILDS), every repetition runs each build's pair per profile in turn,
# so an A/B of two builds sees the same load drift; one table per build.
# A benchmark, not a test: never part of ctest.
#
#   bench/rxpath_cost.sh [--quick]
# Environment:
#   RX_REPS      repetitions (3; --quick: 1)
#   RX_SECONDS   perftest -D (2)
#   RX_PROG      ib_write_bw, ib_read_bw or ib_send_bw (ib_write_bw)
#   RX_SIZE      message size (65536)
#   RX_FREQ      perf sampling frequency, Hz (1000)
#   RX_PROFILES  fault profiles, "-" for lossless
#                ("- reorder=0.01 loss=0.01 loss=0.01,reorder=0.01,dup=0.005")
#   RX_BUILDS    build directories holding lib/libibverbs.so.1 (build)
#   RX_PORT      first TCP port for the rendezvous (25000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
ab_quick "$@"
reps=${RX_REPS:-$([ "$quick" -eq 1 ] && echo 1 || echo 3)}
secs=${RX_SECONDS:-2}
prog=${RX_PROG:-ib_write_bw}
size=${RX_SIZE:-65536}
freq=${RX_FREQ:-1000}
read -r -a profiles <<<"${RX_PROFILES:-- reorder=0.01 loss=0.01 loss=0.01,reorder=0.01,dup=0.005}"
read -r -a builds <<<"${RX_BUILDS:-$root/build}"
port=${RX_PORT:-25000}
port_end=$((port + 2000))
limit=$((secs + 20))
for b in "${builds[@]}"; do
  [ -e "$b/lib/libibverbs.so.1" ] || { echo "no $b/lib/libibverbs.so.1: build first" >&2; exit 1; }
done
for p in "$prog" perf; do
  command -v "$p" >/dev/null || { echo "$p not installed" >&2; exit 1; }
done
tmp=$(mktemp -d)
ab_srv=
trap ab_cleanup EXIT
start=$(date +%s)

# Each side records into OUT.srv.data or OUT.cli.data (the client is the
# one given the server's address last): bash -c "$rec" OUT FREQ CMD...
# shellcheck disable=SC2016
rec='side=srv; [ "${*: -1}" = 127.0.0.1 ] && side=cli
exec perf record -q -F "$1" --call-graph dwarf,16384 -o "$0.$side.data" "${@:2}"'

# inclusive SYMBOL FILE: the samples of SYMBOL's subtree (--children)
inclusive() {
  awk -v s="$1" '$NF == s && $1 ~ /%$/ { sub("%", "", $1); print $1; exit }' "$2"
}

# figures TAG: "name value" lines for one run
figures() {
  local tag=$1 side its
  its=$(awk -v s="$size" '$1 == s { n = $2 } END { print n + 0 }' "$tmp/$tag.cli")
  [ "$its" -gt 0 ] || return 1
  local pkts=$((its * ((size + 4095) / 4096)))
  for side in srv cli; do
    local data=$tmp/$tag.$side.data
    perf report -i "$data" --no-children --sort pid -n --stdio -g none 2>/dev/null |
      awk -v side="$side" -v f="$freq" -v its="$its" '
        $1 ~ /%$/ { n++; s[n] = $2 } END {
          # the busiest thread first
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] > s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
          rest = 0; for (i = 2; i <= n; i++) rest += s[i]
          printf "%s_main_thread %.3f\n%s_other_threads %.3f\n", side, s[1] / f * 1e6 / its, side, rest / f * 1e6 / its }'
    local total
    total=$(perf report -i "$data" --no-children --sort pid -n --stdio -g none 2>/dev/null |
      awk '$1 ~ /%$/ { s += $2 } END { print s + 0 }')
    perf report -i "$data" --children --sort sym --stdio -g none 2>/dev/null >"$data.txt"
    local syms
    if [ "$side" = srv ]; then
      syms="nic_pass sr_engine_rx_ecn sr_ooo_store sr_ooo_drain sr_ooo_send_sack __x64_sys_sendmmsg __x64_sys_recvmmsg"
    else
      syms="__x64_sys_recvmmsg __x64_sys_sendmmsg sr_sack_rx sr_readsel_rx sr_ooo_store sr_ooo_drain"
    fi
    local sym pct
    for sym in $syms; do
      pct=$(inclusive "$sym" "$data.txt")
      awk -v n="${side}_$sym" -v p="${pct:-0}" -v t="$total" -v f="$freq" -v its="$its" \
        'BEGIN { printf "%s %.3f\n", n, p / 100 * t / f * 1e6 / its }'
    done
    rm -f "$data" "$data.txt"
  done
  local sacks rx
  sacks=$(ab_stat "$tmp/$tag.srv" sacks_sent || true)
  rx=$(ab_stat "$tmp/$tag.cli" rx_pkts || true)
  awk -v s="${sacks:-0}" -v r="${rx:-0}" -v p="$pkts" \
    'BEGIN { printf "srv_sacks_per_1000_pkts %.1f\ncli_acks_rcvd_per_1000_pkts %.1f\n", s * 1000 / p, r * 1000 / p }'
  awk -v s="$size" '$1 == s { g = $4 } END { printf "goodput_MBps %.1f\n", g }' "$tmp/$tag.cli"
}

for ((rep = 0; rep < reps; rep++)); do
  for ((k = 0; k < ${#profiles[@]}; k++)); do
    for ((j = 0; j < ${#builds[@]}; j++)); do
      f=${profiles[$k]}
      [ "$f" = - ] && f=
      tag=b$j.r$rep.p$k
      if ab_udp_pair "$tmp/$tag" "$limit" "${builds[$j]}/lib" "$f" bash -c "$rec" "$tmp/$tag" "$freq" \
        "$prog" -F -x 0 -s "$size" -D "$secs" && figures "$tag" >"$tmp/$tag.fig"; then
        :
      else
        echo "rxpath_cost: rep $((rep + 1)) build ${builds[$j]} profile ${profiles[$k]} failed (client $ab_crc, server $ab_src); left out" >&2
        rm -f "$tmp/$tag.fig"
      fi
    done
  done
done

echo "softrdma out-of-order path cost, UDP path, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" rev-parse --short HEAD)"
echo "$prog -s $size -D $secs; $reps repetitions (interleaved); perf record -F $freq --call-graph dwarf; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cells: median [min..max]; CPU us per message unless named otherwise; inclusive of callees"
for ((j = 0; j < ${#builds[@]}; j++)); do
  echo
  echo "build ${builds[$j]}"
  printf '%-30s' figure
  for f in "${profiles[@]}"; do printf ' %-24s' "${f/-/lossless}"; done
  echo
  names=$(cat "$tmp"/b$j.r*.p*.fig 2>/dev/null | awk '!seen[$1]++ { print $1 }')
  for n in $names; do
    printf '%-30s' "$n"
    for ((k = 0; k < ${#profiles[@]}; k++)); do
      v=$(cat "$tmp"/b$j.r*.p"$k".fig 2>/dev/null | awk -v n="$n" '$1 == n { print $2 }' | ab_summary '%.2f')
      printf ' %-24s' "$v"
    done
    echo
  done
done
echo "runtime $(($(date +%s) - start)) s"
