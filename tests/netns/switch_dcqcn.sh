#!/usr/bin/env bash
# DCQCN end to end through srdma-switch: the incast of switch_perftest.sh
# (two unmodified ib_write_bw -D 2 from h0 and h1 into h2, UDP, a 1 Gb/s
# egress with a 64 KiB buffer, where without congestion control a QP ends
# in IBV_WC_RETRY_EXC_ERR about one run in four), now with
# SOFTRDMA_CC=dcqcn on every host and the switch marking ECN (RED, Kmin
# 8 KiB, Kmax 48 KiB). Checks: every perftest exits 0, the switch marked
# softrdma's packets (they are ECT(0)), the receiver's devices sent CNPs and
# the senders' got them (SOFTRDMA_STATS' cc line), and the goodput stays
# within the bottleneck with both senders moving data.
#   switch_dcqcn.sh LIBDIR SWITCH PORT
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/switch_lib.sh"
libdir=$1 swbin=$2 port=$3
sw_test_begin 3 ib_write_bw
SW_HOST_ENV=(SOFTRDMA_STATS=1 SOFTRDMA_CC=dcqcn,line_rate_mbps=1000)

sw_start "$swbin" "$out/sw" --rate 1G --buffer 64K --kmin 8K --kmax 48K --pmax 0.2
sw_incast2 "$out" "$port"
sw_stop
sw_incast2_show "$out" "65536|softrdma: (cc|stats)|error|status"
echo "--- switch"; cat "$out/sw"
[ "$rcs" = " 0 0 0 0" ] || fail "perftest exit codes (cli1 cli2 srv1 srv2):$rcs"
cc() { sed -n "s/^softrdma: cc .* $2=\([0-9]*\).*/\1/p" "$out/$1" | head -1; }
sent=$(($(cc srv1 cnps_sent) + $(cc srv2 cnps_sent)))
rcvd=$(($(cc cli1 cnps_rcvd) + $(cc cli2 cnps_rcvd)))
marks=$(sw_counter "$out/sw" 2 marks)
drops=$(sw_counter "$out/sw" 2 drops)
echo "marks=${marks:-0} drops=${drops:-0} cnps_sent=$sent cnps_rcvd=$rcvd"
[ "${marks:-0}" -gt 0 ] || fail "the switch marked nothing: softrdma's packets were not ECT"
[ "$sent" -gt 0 ] || fail "the receivers sent no CNPs"
[ "$rcvd" -gt 0 ] || fail "the senders received no CNPs"
sw_incast2_goodput "$out" 1
[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
