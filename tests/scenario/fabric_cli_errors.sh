#!/bin/sh
# Bad srdma-fabric flags get a message and exit status 2, never a crash or
# a hang: each case must exit 2 within 10 s and print an error.
bin=$1
fail=0
bad() {
  out=$(timeout 10 "$bin" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 2 ] || [ -z "$out" ]; then
    echo "exit $rc for: $*"; fail=1
  fi
}
bad --workload hd --leaves 3                      # 12 hosts: not a power of two
bad --workload ring --size 0
bad --workload bogus
bad --loss 1.5
bad --loss -0.1
bad --bg-frac 2
bad --sample 0 --series-csv /dev/null
bad --pcap leaf0:spine0                           # no file
bad --pcap leaf0:nowhere /dev/null
bad --pcap leaf0 /dev/null
bad --pcap leaf0:spine0 /nonexistent-dir/x.pcap
bad --workload perm --bg-frac 0.01                # rounds to fewer than 2 hosts
bad --paths 0
bad --paths 17
bad --path-policy bogus
bad --cc bogus
bad --cc dcqcn,nosuch=1
bad --workload perm --queue-csv /dev/null          # no --watch, not an incast
bad --watch leaf0:nowhere --queue-csv /dev/null
bad --watch leaf0 --queue-csv /dev/null
bad --stagger -1
bad --stagger x
[ $fail -eq 0 ] && echo "all bad invocations refused cleanly"
exit $fail
