#!/usr/bin/env bash
# scenario.sim_lost_resend: 2,000 64 KiB WRITEs, 128 in flight, over
# srdma-sim's 10 Gb/s link at 1% loss with 1% reordering and 0.5%
# duplication (seed 1), selective recovery on both nodes. Some resends
# are lost again; each must be resent as soon as a packet sent after it is
# SACKed (RFC 8985 6.3, src/engine/sack.c), not when the probe timeout
# finally fires after the SACKs stop: every byte verified, no transport
# timeout, at least one resend sent again, and the simulated goodput at
# least 9.2 Gb/s (0.93 of the link; 8.9 when lost resends waited for
# probes). Simulated time: the figure does not depend on the machine.
set -euo pipefail
out=$("$1" --op write --size 64K --count 2000 --depth 128 --loss 0.01 --reorder 0.01 \
  --dup 0.005 --timeout 14 --seed 1 --sack)
echo "$out"
grep -q "OK: every byte and completion verified" <<<"$out" || { echo "FAIL: not verified"; exit 1; }
grep -Eq "retransmissions +[0-9]+ packets, 0 timeouts" <<<"$out" || { echo "FAIL: a transport timeout"; exit 1; }
again=$(sed -n 's/.*selective resends (\([0-9]*\) of them again).*/\1/p' <<<"$out")
[ "${again:-0}" -ge 1 ] || { echo "FAIL: no resend was sent again"; exit 1; }
gbps=$(awk '/goodput/ { print $2; exit }' <<<"$out")
awk -v g="$gbps" 'BEGIN { exit !(g >= 9.2) }' || { echo "FAIL: goodput $gbps Gb/s < 9.2"; exit 1; }
echo "ok: $again resends sent again, $gbps Gb/s"
