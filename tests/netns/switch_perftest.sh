#!/usr/bin/env bash
# Two senders, one receiver, through srdma-switch's bottleneck: unmodified
# Debian ib_write_bw -D 2 from h0 and h1 to h2 over UDP (SOFTRDMA_SHM=0),
# the switch's egress at RATE. Checks that the traffic crossed the switch
# (its counters), that the receiver's goodput stays within the bottleneck
# (+5%), that a small buffer with no congestion control drops, and that
# ibv_rc_pingpong -c (data checked) passes through the switch.
#   switch_perftest.sh LIBDIR SWITCH PORT
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/switch_lib.sh"
libdir=$1 swbin=$2 port=$3
rate_gbps=1
buffer=${SR_SWITCH_BUFFER:-256K}
sw_test_begin 3 ib_write_bw ibv_rc_pingpong
SW_HOST_ENV=(SOFTRDMA_CC=none)

# --- the incast: 2 x ib_write_bw into h2 through a 1 Gb/s, small egress buffer
sw_start "$swbin" "$out/sw" --rate ${rate_gbps}G --buffer $buffer
sw_incast2 "$out" "$port"
sw_stop
for f in cli1 cli2 srv1 srv2; do echo "--- $f"; cat "$out/$f"; done
echo "--- switch"; cat "$out/sw"
[ "$rcs" = " 0 0 0 0" ] || fail "perftest exit codes (cli1 cli2 srv1 srv2):$rcs"

sw_incast2_goodput "$out" "$rate_gbps"
rx0=$(sw_counter "$out/sw" 0 rx_bytes) rx1=$(sw_counter "$out/sw" 1 rx_bytes)
tx2=$(sw_counter "$out/sw" 2 tx_bytes) drops=$(sw_counter "$out/sw" 2 drops)
[ "${rx0:-0}" -gt 10000000 ] && [ "${rx1:-0}" -gt 10000000 ] ||
  fail "the senders' traffic did not cross the switch (rx $rx0, $rx1 bytes)"
[ "${tx2:-0}" -gt 10000000 ] || fail "the switch sent the receiver only ${tx2:-0} bytes"
[ "${drops:-0}" -gt 0 ] || fail "no drops at the receiver's port with a $buffer buffer and no CC"
# the egress clock: bytes out of port 2 over the 2 s run no more than the rate allows
# (the run's wall time is longer than -D 2, so this is an upper bound only)

# --- integrity: the pingpong checks every byte (-c) through the switch
sw_start "$swbin" "$out/sw2" --rate ${rate_gbps}G --buffer 1M
p3=$((port + 2))
host 2 "${HOST_ADDR[2]}" timeout 30 ibv_rc_pingpong -g 0 -c -s 65536 -n 200 -p $p3 >"$out/srv" 2>&1 &
srv=$!
sr_wait_listen $p3 ip netns exec "${HOST_NS[2]}" || { echo "FAIL: pingpong not listening"; exit 1; }
host 0 "${HOST_ADDR[0]}" timeout 30 ibv_rc_pingpong -g 0 -c -s 65536 -n 200 -p $p3 "${HOST_ADDR[2]}" >"$out/cli" 2>&1
crc=$?
wait $srv
src=$?
sw_stop
echo "--- switch"; cat "$out/sw2"
sr_report $src $crc
[ "$(sw_counter "$out/sw2" 2 tx_frames)" -gt 200 ] || fail "the pingpong did not cross the switch"

[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
