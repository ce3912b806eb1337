#!/bin/sh
# A simulated 16-to-1 incast (docs/CONGESTION.md, "Incast in the fabric
# simulator"): 16 senders join one every 100 us, each with a long RDMA
# WRITE, into one 100 Gbit/s switch port with a 2 MiB buffer and RED
# marking from 12.5 KB to 500 KB. The port's queue is sampled every 10 us
# (--queue-csv). With DCQCN and with nscc the queue stays bounded: no
# drop at the port, and its largest queue below 1.75 MiB (a window short of the buffer); without
# congestion control the engines' windows (16 x 64 packets of 4 KiB) fill
# the buffer and it drops. Deterministic (simulated time): the counters,
# not timings, are asserted. Also: header-only and verified mode give the
# same run with dcqcn and nscc.
bin=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
buffer=2097152
run() { # cc -> "max_queue drops marks" of the target's port
  "$bin" --leaves 1 --spines 1 --hosts-per-leaf 17 --host-delay 2500 --buffer 2M \
    --kmin 12500 --kmax 500K --pmax 0.01 --workload incast --incast-n 16 --stagger 100 \
    --size 64M --mode header --sack --cc "$1" --until 3 --sample 10 \
    --queue-csv "$tmp/q_$1.csv" >"$tmp/out_$1" 2>&1
  grep -q '^digest' "$tmp/out_$1" || { cat "$tmp/out_$1"; echo "run $1 did not finish"; exit 1; }
  awk -F, 'NR > 1 { if ($3 > m) m = $3; d += $4; k += $5; n++ }
           END { printf "%d %d %d %d\n", m, d, k, n }' "$tmp/q_$1.csv"
}
fail=0
for cc in none dcqcn nscc; do
  set -- $(run $cc)
  echo "$cc: port max queue $1 bytes, drops $2, ECN marks $3, samples $4"
  [ "$4" -ge 300 ] || { echo "  FAIL: $4 samples, want 301 (3 ms at 10 us)"; fail=1; }
  [ "$3" -gt 0 ] || { echo "  FAIL: no ECN marks at the port"; fail=1; }
  if [ $cc = none ]; then
    [ "$2" -gt 0 ] || { echo "  FAIL: without congestion control the port should drop"; fail=1; }
    [ "$1" -gt $((buffer - 8192)) ] || { echo "  FAIL: the queue should reach the buffer"; fail=1; }
  else
    [ "$2" -eq 0 ] || { echo "  FAIL: $cc dropped at the port"; fail=1; }
    [ "$1" -lt 1835008 ] || { echo "  FAIL: $cc let the queue reach $1 (>= 1.75 MiB)"; fail=1; }
  fi
done
# Header-only mode (the bench's) is the same run as verified mode under
# congestion control too: the same digest over every counter and time.
for cc in dcqcn nscc; do
  d=""
  for mode in verified header; do
    d="$d $("$bin" --leaves 1 --spines 1 --hosts-per-leaf 17 --host-delay 2500 --buffer 2M \
      --kmin 12500 --kmax 500K --pmax 0.01 --workload incast --incast-n 16 --size 2M \
      --mode $mode --sack --cc $cc --until 1 2>/dev/null | sed -n 's/^digest *//p')"
  done
  set -- $d
  echo "$cc digests: verified $1, header-only $2"
  [ -n "$1" ] && [ "$1" = "$2" ] || { echo "  FAIL: the modes differ"; fail=1; }
done
exit $fail
