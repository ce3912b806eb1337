#!/usr/bin/env bash
# bench/tail_ab.sh: tail-loss repair and spurious resends, A/B against a
# baseline build, over the UDP path (SOFTRDMA_SHM=0) with Debian's
# unmodified ibv_rc_pingpong and ib_write_bw.
#
# Points, each run with the baseline's libraries and with this build's,
# interleaved (rep 1: A then B, rep 2: B then A, ...) so that load drifts
# hit both alike:
#   - ibv_rc_pingpong -c 4 KiB: usec/iter at loss 1% over lossless
#     (target <= 1.5);
#   - ibv_rc_pingpong -c 64 KiB: usec/iter at loss 10% over lossless
#     (target <= 10);
#   - ib_write_bw -s 65536 -D 1 at loss 0.1%: retransmitted packets per
#     lost packet, both sides' SOFTRDMA_STATS (target <= 1.5).
# Every lossy profile adds reorder=0.01,dup=0.005 (as bench/loss.sh does).
# Cells: median [min..max] over repetitions; a ratio is taken within one
# repetition and one build (lossy over the lossless run just before it).
# A benchmark, not a test: never part of ctest.
#
#   bench/tail_ab.sh
# Environment:
#   TAIL_BASE   baseline build directory (/work/base/build)
#   TAIL_NEW    this build (build)
#   TAIL_REPS   repetitions (3)
#   TAIL_PORT   first TCP port for the rendezvous (26000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
base=${TAIL_BASE:-/work/base/build}
new=${TAIL_NEW:-$root/build}
reps=${TAIL_REPS:-3}
port=${TAIL_PORT:-26000}
for b in "$base" "$new"; do
  [ -e "$b/lib/libibverbs.so.1" ] || { echo "no $b/lib/libibverbs.so.1" >&2; exit 1; }
done
for p in ib_write_bw ibv_rc_pingpong; do
  command -v "$p" >/dev/null || { echo "missing $p" >&2; exit 1; }
done
tmp=$(mktemp -d)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
trap ab_cleanup EXIT
raw=$tmp/raw
: >"$raw"

# pair LIB FAULT LIMIT CMD...: server and client, outputs in $tmp/out.srv
# and $tmp/out.cli; returns non-zero when either failed.
pair() {
  local lib=$1 fault=$2 limit=$3
  shift 3
  ab_udp_pair "$tmp/out" "$limit" "$lib" "$fault" "$@"
}

# counter NAME: the sum of a SOFTRDMA_STATS counter over both sides.
counter() {
  grep -ho "[ ]$1=[0-9]*" "$tmp/out.srv" "$tmp/out.cli" | awk -F= '{s += $2} END {print s + 0}'
}

pp() { # pp WHO LIB SIZE N FAULT
  local who=$1 lib=$2 size=$3 n=$4 fault=$5 us
  if pair "$lib" "$fault" 60 ibv_rc_pingpong -g 0 -c -s "$size" -n "$n"; then
    us=$(awk '/usec\/iter/ {print $(NF-1)}' "$tmp/out.cli")
    echo "$who pp$size${fault:+_lossy} $rep $us" >>"$raw"
  else
    echo "tail_ab: rep $rep $who ping-pong $size ${fault:-lossless} failed" >&2
  fi
}

bw() { # bw WHO LIB
  local who=$1 lib=$2
  if pair "$lib" "loss=0.001,reorder=0.01,dup=0.005" 20 ib_write_bw -s 65536 -D 1; then
    echo "$who rexmit $rep $(counter retransmits) $(counter fault_lost) $(counter sack_spurious)" >>"$raw"
  else
    echo "tail_ab: rep $rep $who ib_write_bw failed" >&2
  fi
}

point() { # point WHO LIB
  pp "$1" "$2" 4096 500 ""
  pp "$1" "$2" 4096 500 "loss=0.01,reorder=0.01,dup=0.005"
  pp "$1" "$2" 65536 50 ""
  pp "$1" "$2" 65536 100 "loss=0.1,reorder=0.01,dup=0.005"
  bw "$1" "$2"
}

for ((rep = 1; rep <= reps; rep++)); do
  if ((rep % 2)); then
    point base "$base/lib"
    point new "$new/lib"
  else
    point new "$new/lib"
    point base "$base/lib"
  fi
done

# summary WHO: the three figures of one build, median [min..max]
summary() {
  awk -v who="$1" '
    function cell(a, n,   i, j, t) {
      if (!n) return "n/a"
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return sprintf("%.2f [%.2f..%.2f]", (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2, a[1], a[n])
    }
    $1 == who { v[$2, $3] = $4; if ($2 == "rexmit") { rx[$3] = $4; lost[$3] = $5 } reps[$3] = 1 }
    END {
      for (r in reps) {
        if ((("pp4096_lossy", r) in v) && v["pp4096", r] > 0) p4[++n4] = v["pp4096_lossy", r] / v["pp4096", r]
        if ((("pp65536_lossy", r) in v) && v["pp65536", r] > 0) p64[++n64] = v["pp65536_lossy", r] / v["pp65536", r]
        if ((r in lost) && lost[r] > 0) q[++nq] = rx[r] / lost[r]
      }
      printf "%-5s %-26s %-26s %-26s\n", who, cell(p4, n4), cell(p64, n64), cell(q, nq)
    }' "$raw"
}

echo "softrdma tail repair A/B, UDP path, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "base: $base   new: $new (commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo ?))"
echo "reps $reps interleaved; faults add reorder=0.01,dup=0.005; cells: median [min..max]"
printf '%-5s %-26s %-26s %-26s\n' build "pp 4K @1% / lossless" "pp 64K @10% / lossless" "write_bw rexmit/lost @0.1%"
printf '%-5s %-26s %-26s %-26s\n' target "<= 1.5" "<= 10" "<= 1.5"
summary base
summary new
echo "lossless usec/iter (4K, 64K) per rep:"
awk '$2 == "pp4096" || $2 == "pp65536" {printf "  %s %s rep %s: %s\n", $1, $2, $3, $4}' "$raw"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
