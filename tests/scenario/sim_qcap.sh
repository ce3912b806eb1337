#!/usr/bin/env bash
# scenario.sim_qcap: 400 64 KiB SENDs, 128 in flight, over srdma-sim's
# 1 Gb/s link with its 16 MiB queue, at 5% loss with 1% reordering and
# 0.5% duplication, selective recovery on both nodes, the transport timer
# at timeout 14 (67 ms). The 2,048-packet window is 8 MiB, 67 ms of that
# link: without the requester's cap on the queue it builds (src/engine/
# qcap.c, --qdelay-us 0) a repair waits behind the whole window twice and
# the QP times out with its peer alive; with the cap at 1 ms
# (SOFTRDMA_QDELAY_US=1000; off by default) every byte arrives verified, without a transport timeout,
# at 0.85 of the link or more. Simulated time: deterministic per seed.
set -euo pipefail
sim=$1
run() {
  "$sim" --op send --size 64K --count 400 --depth 128 --rate 1G --loss 0.05 --reorder 0.01 \
    --dup 0.005 --timeout 14 --sack "$@"
}
timeouts() { sed -n 's/.*retransmissions *[0-9]* packets, \([0-9]*\) timeouts.*/\1/p' <<<"$1"; }
for seed in 1 3; do
  off=$(run --seed "$seed" --qdelay-us 0)
  grep -q "OK: every byte and completion verified" <<<"$off" || { echo "$off"; echo "FAIL: uncapped not verified"; exit 1; }
  t=$(timeouts "$off")
  [ "${t:-0}" -ge 1 ] || { echo "$off"; echo "FAIL: seed $seed: no timeout without the cap (the test no longer shows the queue)"; exit 1; }
  on=$(run --seed "$seed" --qdelay-us 1000)
  echo "$on"
  grep -q "OK: every byte and completion verified" <<<"$on" || { echo "FAIL: not verified"; exit 1; }
  t=$(timeouts "$on")
  [ "${t:-1}" -eq 0 ] || { echo "FAIL: seed $seed: $t transport timeouts with the cap"; exit 1; }
  gbps=$(awk '/goodput/ { print $2; exit }' <<<"$on")
  awk -v g="$gbps" 'BEGIN { exit !(g >= 0.85) }' || { echo "FAIL: seed $seed: goodput $gbps Gb/s < 0.85"; exit 1; }
  echo "ok: seed $seed: $gbps Gb/s, no timeout (uncapped: $(timeouts "$off") timeouts)"
done
