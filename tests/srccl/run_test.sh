#!/usr/bin/env bash
# run_test.sh SRCCL_RUN: srccl-run's contract, case by case.
set -u
run=$1
fails=0
now() { date +%s.%N; }
# check NAME WANT_STATUS MAX_SECONDS -- srccl-run args...
check() {
  local name=$1 want=$2 max=$3
  shift 4
  local t0 out rc dt
  t0=$(now)
  out=$("$run" "$@" 2>&1)
  rc=$?
  dt=$(echo "$(now) - $t0" | bc)
  if [ "$rc" -ne "$want" ] || [ "$(echo "$dt > $max" | bc)" -eq 1 ]; then
    echo "FAIL $name: status $rc (want $want) after $dt s (max $max)"
    echo "$out" | sed 's/^/    /'
    fails=$((fails + 1))
  else
    echo "ok   $name: status $rc after $dt s"
  fi
  last_out=$out
}

check "all succeed" 0 5 -- -n 3 true
check "first failure's status, others stopped" 3 5 -- \
  -n 3 sh -c 'if [ "$SRCCL_RANK" = 1 ]; then exit 3; fi; exec sleep 30'
check "signal death is 128+signal" 137 5 -- \
  -n 2 sh -c 'if [ "$SRCCL_RANK" = 0 ]; then kill -9 $$; fi; exec sleep 30'
check "time limit" 124 5 -- -n 2 -t 1 sleep 30
check "a rank that ignores SIGTERM is killed" 124 6 -- \
  -n 2 -t 1 sh -c 'trap "" TERM; while :; do sleep 0.1; done'
check "missing program" 127 5 -- -n 2 /nonexistent/program
check "keep going (-k) lets the others finish" 5 5 -- \
  -n 2 -k sh -c 'if [ "$SRCCL_RANK" = 0 ]; then exit 5; fi; sleep 1; echo rank1-finished'
if ! grep -q rank1-finished <<<"$last_out"; then echo "FAIL -k: rank 1 did not finish"; fails=$((fails + 1)); fi
check "environment" 0 5 -- -n 4 sh -c 'echo "env $SRCCL_RANK $SRCCL_NRANKS $SRCCL_ROOT_ADDR"'
ranks=$(grep '^env' <<<"$last_out" | awk '{print $2}' | sort | tr '\n' ' ')
addrs=$(grep '^env' <<<"$last_out" | awk '{print $3, $4}' | sort -u | wc -l)
if [ "$ranks" != "0 1 2 3 " ] || [ "$addrs" -ne 1 ] || ! grep -q 'env 0 4 127.0.0.1:' <<<"$last_out"; then
  echo "FAIL environment: $last_out"; fails=$((fails + 1))
fi
check "torch environment" 0 5 -- -n 2 --env torch sh -c \
  'test -z "${SRCCL_RANK:-}" && test "$WORLD_SIZE" = 2 && test "$MASTER_ADDR" = 127.0.0.1 && test -n "$RANK"'
check "bad usage" 2 5 -- -n 0 true
[ "$fails" -eq 0 ] && echo PASS || { echo "$fails FAILED"; exit 1; }
