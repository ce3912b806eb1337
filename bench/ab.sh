#!/usr/bin/env bash
# bench/ab.sh A [B]: an interleaved A/B of two commits' benchmarks.
#
# Each commit is checked out in its own worktree (/tmp/softrdma-ab-<sha>)
# and benchmarked with its own scripts and build. A round runs bench/run.sh
# once (BENCH_REPS=1) for each commit and then bench/srccl_vs_mpi.sh once
# (BENCH_REPS=1), the order A,B or B,A alternating between rounds, so that
# drifts in machine load hit both alike. The report gives, per point, the
# median, min and max over the rounds for A and for B, B's median over A's,
# and a verdict: "worse" only when B's whole range is on the bad side of
# A's whole range (beyond the noise of this run), "better" the other way,
# else "same".
#
# Environment:
#   AB_ROUNDS   rounds (3)
#   AB_SUITES   which benchmarks ("run srccl")
#   AB_RANKS    srccl_vs_mpi.sh's BENCH_RANKS ("2")
#   AB_MAX      srccl_vs_mpi.sh's BENCH_MAX (16M)
#   AB_OUT      report (bench/results/ab-<UTC timestamp>.txt)
# A benchmark, not a test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: bench/ab.sh A_COMMIT [B_COMMIT (HEAD)]" >&2; exit 2; }
a=$(git -C "$root" rev-parse --short "$1")
b=$(git -C "$root" rev-parse --short "${2:-HEAD}")
rounds=${AB_ROUNDS:-3}
suites=${AB_SUITES:-"run srccl"}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench: AB_ROUNDS must be a positive integer" >&2; exit 2; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${AB_OUT:-$root/bench/results/ab-$stamp.txt}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log() { echo "ab: $*" >&2; }

tree() { # tree SHA: a worktree of that commit
  local d=/tmp/softrdma-ab-$1
  if [ ! -d "$d" ]; then
    git -C "$root" worktree add -q --detach "$d" "$1" >&2
  fi
  echo "$d"
}
ta=$(tree "$a")
tb=$(tree "$b")

# raw lines: "suite key version round value"
raw=$tmp/raw
: >"$raw"
one() { # one VERSION TREE ROUND SUITE
  local v=$1 t=$2 r=$3 s=$4 f=$tmp/$4-$1-$3
  case $s in
  run)
    BENCH_REPS=1 BENCH_QUIET_WAIT=0 BENCH_BUILD="$t/build-bench" BENCH_OUT="$f" \
      "$t/bench/run.sh" >"$f.log" 2>&1 || log "run.sh $v round $r failed: $(tail -1 "$f.log")"
    [ -f "$f" ] && awk -v v="$v" -v r="$r" '
      /^raw values/ { on = 1; next }
      on && NF == 3 && $3 ~ /^-?[0-9.]+$/ { print "run", $1, v, r, $3 }' "$f" >>"$raw"
    ;;
  srccl)
    BENCH_REPS=1 BENCH_RANKS="${AB_RANKS:-2}" BENCH_MAX="${AB_MAX:-16M}" BENCH_BUILD="$t/build-bench" \
      BENCH_OUT="$f" "$t/bench/srccl_vs_mpi.sh" >"$f.log" 2>&1 ||
      log "srccl_vs_mpi.sh $v round $r failed: $(tail -1 "$f.log")"
    # rows: impl ranks rep size time busbw
    [ -f "$f.rows" ] && awk -v v="$v" -v r="$r" 'NF >= 6 {
      print "srccl", $1 "_np" $2 "_" $4 "_busbw", v, r, $6 }' "$f.rows" >>"$raw"
    ;;
  esac
}

t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  for s in $suites; do
    if ((r % 2)); then order="A B"; else order="B A"; fi
    for v in $order; do
      log "round $r/$rounds: $s, $v"
      if [ "$v" = A ]; then one A "$ta" "$r" "$s"; else one B "$tb" "$r" "$s"; fi
    done
  done
done
t1=$(date +%s)

{
  echo "bench/ab.sh: A = $a, B = $b; $rounds interleaved rounds, $((t1 - t0)) s;" \
    "loadavg at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "verdict: 'worse'/'better' only when the two ranges do not overlap"
  echo
  printf '%-6s %-34s %10s %10s %10s %10s %7s  %s\n' suite point "A median" "A range" \
    "B median" "B range" "B/A" verdict
  sort -k1,1 -k2,2 -k3,3 -k5,5g "$raw" | awk '
    function flush(   lo, ma, mb, rel, v, bad) {
      if (key == "" || na == 0 || nb == 0) return
      ma = med(A, na); mb = med(B, nb)
      # lower is better for times, latencies, percentiles, loss and CPU
      lo = key ~ /lat|p99|loss|idle|_us|time/
      if (lo) bad = (B[1] > A[na]); else bad = (B[nb] < A[1])
      if (lo) good = (B[nb] < A[1]); else good = (B[1] > A[na])
      v = bad ? "worse" : good ? "better" : "same"
      rel = ma != 0 ? sprintf("%.3f", mb / ma) : "n/a"
      printf "%-6s %-34s %10s %10s %10s %10s %7s  %s\n", suite, key, ma,
        A[1] ".." A[na], mb, B[1] ".." B[nb], rel, v
    }
    function med(x, n) { return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
    { k = $1 " " $2
      if (k != cur) { flush(); cur = k; suite = $1; key = $2; na = nb = 0 }
      if ($3 == "A") A[++na] = $5; else B[++nb] = $5 }
    END { flush() }'
} | tee "$out"
log "report in $out"
