#!/usr/bin/env bash
# bind.sh SRCCL_RUN: srccl-run's --bind.
#   auto (default), ranks that fit the usable CPUs: each rank on one CPU of
#        the launcher's set, no two ranks on the same one
#   auto, more ranks than CPUs: every rank keeps the launcher's whole set
#   none: every rank keeps the whole set; core with more ranks than CPUs:
#        one CPU each, round robin
#   a bad --bind value: usage error (status 2)
# Skipped (77) with fewer than 2 usable CPUs.
set -u
run=$1
fail() { echo "FAIL: $*"; exit 1; }
all=$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
ncpu=$(nproc)
[ "$ncpu" -ge 2 ] || { echo "skip: $ncpu usable CPU(s)"; exit 77; }
# Each rank prints "rank cpu-list".
ranks() {
  "$run" -t 20 "$@" sh -c 'echo "$SRCCL_RANK $(grep Cpus_allowed_list /proc/self/status | \
    awk "{print \$2}")"' | sort -n
}
out=$(ranks -n "$ncpu") || fail "srccl-run -n $ncpu failed"
echo "auto, $ncpu ranks:"; echo "$out"
[ "$(echo "$out" | wc -l)" -eq "$ncpu" ] || fail "expected $ncpu ranks"
echo "$out" | awk '$2 !~ /^[0-9]+$/ { print "rank " $1 " not on one CPU: " $2; bad = 1 }
                   END { exit bad }' || fail "auto binding"
[ "$(echo "$out" | awk '{print $2}' | sort -u | wc -l)" -eq "$ncpu" ] || fail "two ranks share a CPU"
out=$(ranks -n $((ncpu + 1))) || fail "srccl-run -n $((ncpu + 1)) failed"
echo "auto, $((ncpu + 1)) ranks:"; echo "$out"
echo "$out" | awk -v all="$all" '$2 != all { print "rank " $1 " bound: " $2; bad = 1 }
                                 END { exit bad }' || fail "auto bound an oversubscribed job"
out=$(ranks -n 2 --bind none) || fail "srccl-run --bind none failed"
echo "none:"; echo "$out"
echo "$out" | awk -v all="$all" '$2 != all { print "rank " $1 " bound: " $2; bad = 1 }
                                 END { exit bad }' || fail "--bind none bound a rank"
out=$(ranks -n $((ncpu + 1)) --bind core) || fail "srccl-run --bind core failed"
echo "core, $((ncpu + 1)) ranks:"; echo "$out"
echo "$out" | awk '$2 !~ /^[0-9]+$/ { print "rank " $1 " not on one CPU: " $2; bad = 1 }
                   END { exit bad }' || fail "--bind core"
[ "$(echo "$out" | awk 'NR == 1 || NR == '$((ncpu + 1))' {print $2}' | sort -u | wc -l)" -eq 1 ] ||
  fail "--bind core: rank $ncpu not on rank 0's CPU (round robin)"
"$run" -n 2 --bind bogus true 2>/dev/null
[ $? -eq 2 ] || fail "--bind bogus: expected status 2"
echo "OK"
