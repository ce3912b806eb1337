#!/usr/bin/env bash
# clean_fail.sh LIBDIR PATTERN PROG ARGS...: PROG, run unmodified on softrdma,
# must fail the way a user can act on: a non-zero exit (not a signal, not a
# hang) and PATTERN (an extended regex) in what it prints.
set -u
libdir=$1 pattern=$2
shift 2
out=$(LD_LIBRARY_PATH=$libdir timeout -s KILL 20 "$@" 2>&1 </dev/null)
rc=$?
printf '%s\n' "$out"
echo "exit status: $rc"
if [ "$rc" -eq 0 ]; then echo "FAIL: $1 succeeded where it should fail"; exit 1; fi
if [ "$rc" -ge 128 ]; then echo "FAIL: $1 died of signal $((rc - 128))"; exit 1; fi
if ! grep -Eq -- "$pattern" <<<"$out"; then echo "FAIL: no message matching /$pattern/"; exit 1; fi
echo "OK: clean failure"
