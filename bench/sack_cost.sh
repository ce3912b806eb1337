#!/usr/bin/env bash
# bench/sack_cost.sh: what the requester's SACK scoreboard (src/engine/
# sack.c) costs the ib_write_bw client under loss with reordering, against
# a second build (a baseline, e.g. main) in the same run.
#
# Per repetition and build (interleaved: base, new, base, new, ...): one
# ib_write_bw -F -x 0 -s 65536 -D SECS pair over the UDP path
# (SOFTRDMA_SHM=0) with SOFTRDMA_FAULT loss=LOSS,reorder=0.01,dup=0.005 on
# both sides, the client under perf record -e cpu-clock. Printed: the
# client's share of samples in the scoreboard's functions (sr_sack_sb_*
# and what they did not inline), the share of sr_sack_sb_mark alone, the
# client's selective resends per packet the server's injector dropped and
# the share of those a D-SACK proved spurious, and the load average. A
# share of one process's samples is far steadier under load than Gb/s;
# medians and [min..max] over the repetitions close the table.
# A benchmark, not a test: never part of ctest.
#
#   bench/sack_cost.sh BASE_BUILD [NEW_BUILD]
# Environment: COST_REPS (3), COST_SECONDS (3), COST_LOSS (0.01),
#   COST_PORT (24900)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BASE_BUILD [NEW_BUILD]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
base=$1 new=${2:-$root/build}
reps=${COST_REPS:-3} secs=${COST_SECONDS:-3} loss=${COST_LOSS:-0.01} port=${COST_PORT:-24900}
for b in "$base" "$new"; do
  [ -e "$b/lib/libibverbs.so.1" ] || { echo "no $b/lib/libibverbs.so.1" >&2; exit 1; }
done
command -v perf >/dev/null && perf stat -e cpu-clock true >/dev/null 2>&1 ||
  { echo "perf with cpu-clock is needed" >&2; exit 1; }
command -v ib_write_bw >/dev/null || { echo "missing ib_write_bw (perftest)" >&2; exit 1; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
fault="loss=$loss,reorder=0.01,dup=0.005"
stat() { grep -o "$1=[0-9]*" "$2" | head -n 1 | cut -d= -f2; }
median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3g [%.3g..%.3g]", m, a[1], a[NR]}'; }
echo "sack_cost: ib_write_bw -s 65536 -D $secs client, $fault, $reps interleaved repetitions"
printf '%-5s %-4s %-9s %-9s %-9s %-10s %-6s\n' build rep sb_share mark_sh resend/ls spurious load
for ((r = 1; r <= reps; r++)); do
  for v in base new; do
    b=$base
    [ $v = new ] && b=$new
    port=$((port + 1))
    env LD_LIBRARY_PATH="$b/lib" SOFTRDMA_SHM=0 SOFTRDMA_STATS=1 SOFTRDMA_FAULT="$fault,seed=$((2 * r + 1))" \
      timeout $((secs + 30)) ib_write_bw -F -x 0 -s 65536 -D "$secs" -p "$port" >"$tmp/srv" 2>&1 &
    srv=$!
    sleep 0.5
    env LD_LIBRARY_PATH="$b/lib" SOFTRDMA_SHM=0 SOFTRDMA_STATS=1 SOFTRDMA_FAULT="$fault,seed=$((2 * r + 2))" \
      timeout $((secs + 30)) perf record -q -e cpu-clock -F 4000 -o "$tmp/perf" -- \
      ib_write_bw -F -x 0 -s 65536 -D "$secs" -p "$port" 127.0.0.1 >"$tmp/cli" 2>&1 || true
    wait "$srv" || true
    srv=
    perf report -i "$tmp/perf" --stdio --sort sym 2>/dev/null >"$tmp/rep" || true
    sb=$(grep -E 'sr_sack_sb_|\] (sb_get|sb_put|bm_get|bm_count|sb_valid|low_bits)$' "$tmp/rep" |
      awk '{gsub("%", "", $1); s += $1} END {printf "%.2f", s}')
    mk=$(grep -E 'sr_sack_sb_mark$' "$tmp/rep" | awk '{gsub("%", "", $1); s += $1} END {printf "%.2f", s}')
    rs=$(stat sack_resends "$tmp/cli") sp=$(stat sack_spurious "$tmp/cli") ls=$(stat fault_lost "$tmp/srv")
    rl=$(awk -v a="${rs:-0}" -v b="${ls:-0}" 'BEGIN {print b ? a / b : "-"}')
    sf=$(awk -v a="${sp:-0}" -v b="${rs:-0}" 'BEGIN {print b ? a / b : "-"}')
    ld=$(cut -d' ' -f1 /proc/loadavg)
    printf '%-5s %-4s %-9s %-9s %-9.3g %-10.3g %-6s\n' $v "$r" "$sb%" "$mk%" "$rl" "$sf" "$ld"
    echo "$v $sb $mk $rl $sf" >>"$tmp/raw"
  done
done
for v in base new; do
  printf '%-5s median [min..max]: scoreboard %s%%, mark %s%%, resends/lost %s, spurious %s\n' $v \
    "$(awk -v v=$v '$1 == v {print $2}' "$tmp/raw" | median)" \
    "$(awk -v v=$v '$1 == v {print $3}' "$tmp/raw" | median)" \
    "$(awk -v v=$v '$1 == v && $4 != "-" {print $4}' "$tmp/raw" | median)" \
    "$(awk -v v=$v '$1 == v && $5 != "-" {print $5}' "$tmp/raw" | median)"
done
