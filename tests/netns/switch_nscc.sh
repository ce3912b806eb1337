#!/usr/bin/env bash
# nscc end to end through srdma-switch: the 2-to-1 incast of
# switch_dcqcn.sh (two unmodified ib_write_bw -D 2 from h0 and h1 into h2,
# UDP, a 1 Gb/s egress with a 64 KiB buffer, RED from 8 KiB to 48 KiB),
# with SOFTRDMA_CC=nscc on every host, its windows at most 28 KiB each (two
# of them and their headers fit the buffer). Checks: every perftest exits
# 0, the switch marked softrdma's packets, the receiver's responders echoed
# the marks (ECE) and reported their ACK holds, the senders' requesters
# took both (SOFTRDMA_STATS' stats-ecn line: the echo and the hold report
# ride the SACK agreement, docs/WIRE.md), and the goodput stays within the
# bottleneck with both senders moving data.
#   switch_nscc.sh LIBDIR SWITCH PORT
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/switch_lib.sh"
libdir=$1 swbin=$2 port=$3
sw_test_begin 3 ib_write_bw
SW_HOST_ENV=(SOFTRDMA_STATS=1 SOFTRDMA_CC=nscc,line_rate_mbps=1000,init_wnd=16384,max_wnd=28672)

sw_start "$swbin" "$out/sw" --rate 1G --buffer 64K --kmin 8K --kmax 48K --pmax 0.2
sw_incast2 "$out" "$port"
sw_stop
sw_incast2_show "$out" "65536|softrdma: (cc|stats |stats-ecn)|error|status"
echo "--- switch"; cat "$out/sw"
[ "$rcs" = " 0 0 0 0" ] || fail "perftest exit codes (cli1 cli2 srv1 srv2):$rcs"
ecn() { sed -n "s/^softrdma: stats-ecn .*$2=\([0-9]*\).*/\1/p" "$out/$1" | head -1; }
ece_sent=$(($(ecn srv1 ece_sent) + $(ecn srv2 ece_sent)))
ece_rcvd=$(($(ecn cli1 ece_rcvd) + $(ecn cli2 ece_rcvd)))
holds_sent=$(($(ecn srv1 holds_sent) + $(ecn srv2 holds_sent)))
holds_rcvd=$(($(ecn cli1 holds_rcvd) + $(ecn cli2 holds_rcvd)))
marks=$(sw_counter "$out/sw" 2 marks)
drops=$(sw_counter "$out/sw" 2 drops)
echo "marks=${marks:-0} drops=${drops:-0} ece_sent=$ece_sent ece_rcvd=$ece_rcvd" \
  "holds_sent=$holds_sent holds_rcvd=$holds_rcvd"
[ "${marks:-0}" -gt 0 ] || fail "the switch marked nothing: softrdma's packets were not ECT"
[ "$ece_sent" -gt 0 ] && [ "$ece_rcvd" -gt 0 ] || fail "no ECN echo went from the responders to the requesters"
[ "$holds_sent" -gt 0 ] && [ "$holds_rcvd" -gt 0 ] || fail "no ACK carried a hold report"
[ "$holds_rcvd" -le "$holds_sent" ] || fail "more hold reports received than sent"
sw_incast2_goodput "$out" 1
[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
