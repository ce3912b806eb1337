#!/usr/bin/env bash
# fault.sh SRCCL_RUN FAULT_TEST MODE NRANKS EXPECTED_STATUS
# Runs fault_test MODE on NRANKS ranks (srccl-run -k: the launcher lets the
# survivors finish) with SRCCL_TIMEOUT=5 unless set, and checks srccl-run's
# status (the victim's) and that every survivor printed "survivor OK".
set -u
run=$1 prog=$2 mode=$3 n=$4 want=$5
export SRCCL_TIMEOUT=${SRCCL_TIMEOUT:-5}
start=$(date +%s.%N)
out=$("$run" -n "$n" -k -t 60 "$prog" "$mode" 2>&1)
rc=$?
echo "$out"
echo "srccl-run: status $rc after $(echo "$(date +%s.%N) - $start" | bc) s"
ok=$(grep -c "survivor OK" <<<"$out")
if [ "$rc" -ne "$want" ]; then echo "FAIL: srccl-run status $rc, expected $want"; exit 1; fi
if [ "$ok" -ne $((n - 1)) ]; then echo "FAIL: $ok of $((n - 1)) survivors OK"; exit 1; fi
echo PASS
