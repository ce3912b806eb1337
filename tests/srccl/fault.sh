#!/usr/bin/env bash
# fault.sh SRCCL_RUN FAULT_TEST MODE NRANKS EXPECTED_STATUS [PATTERN]
# Runs fault_test MODE on NRANKS ranks (srccl-run -k: the launcher lets the
# survivors finish) with SRCCL_TIMEOUT=5 unless set, and checks srccl-run's
# status (the victim's) and that every survivor printed "survivor OK"
# (and, given PATTERN, an error line matching it: the path that noticed).
set -u
run=$1 prog=$2 mode=$3 n=$4 want=$5 pat=${6:-}
export SRCCL_TIMEOUT=${SRCCL_TIMEOUT:-5}
start=$(date +%s.%N)
out=$("$run" -n "$n" -k -t 60 "$prog" "$mode" 2>&1)
rc=$?
echo "$out"
echo "srccl-run: status $rc after $(echo "$(date +%s.%N) - $start" | bc) s"
ok=$(grep -c "survivor OK" <<<"$out")
if [ "$rc" -ne "$want" ]; then echo "FAIL: srccl-run status $rc, expected $want"; exit 1; fi
if [ "$ok" -ne $((n - 1)) ]; then echo "FAIL: $ok of $((n - 1)) survivors OK"; exit 1; fi
if [ -n "$pat" ]; then
    seen=$(grep "more calls:" <<<"$out" | grep -c -E "$pat")
    if [ "$seen" -ne $((n - 1)) ]; then echo "FAIL: $seen of $((n - 1)) errors match /$pat/"; exit 1; fi
fi
echo PASS
