#!/usr/bin/env bash
# Soak (a benchmark-style run, not a test): SOAK_SECONDS (default 300) of
# mixed operations under injected faults, every byte checked, then a
# summary for docs/RELIABILITY.md. Rounds, chosen at random:
#   - Debian's ibv_rc_pingpong -c (data validated), random size and fault
#     profile (loss up to 5%, reordering, duplication, corruption, delay);
#   - the verbs test programs' data cases (WRITE, WRITE_IMM, READ, SEND,
#     SEND_IMM, atomics, multi-SGE, inline, READ/atomic interleaving: every
#     byte and completion checked) under a fault profile;
#   - srdma-sim transfers of every operation through the simulator (loss
#     up to 10%, reordering, duplication, corruption), every byte checked;
#   - if built, the hostile-packet test against a live device;
#   - the shared-memory path (no faults: they are injected by the UDP
#     driver): ibv_rc_pingpong -c or the verbs data cases, or a 4-QP
#     ib_write_bw burst that overruns the receiver's ring (the sender's
#     backlog); each round must have gone through shared memory.
# Any failure stops the soak with its log. Traffic stays on 127.0.0.0/8.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SOAK_SECONDS:-300}
build=${BUILD:-build}
[ -x "$build/bin/srdma-sim" ] || { cmake -S . -B "$build" >/dev/null && cmake --build "$build" -j"$(nproc)" >/dev/null; }
[ -x "$build/bin/verbs_ops_test" ] || { echo "soak: build $build first"; exit 1; }
build=$(cd "$build" 2>/dev/null && pwd || echo "$PWD/$build")
lib=$build/lib
bin=$build/bin
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
RANDOM=${SOAK_SEED:-1}

profiles=("loss=0.05" "loss=0.02,reorder=0.02,dup=0.01,corrupt=0.01" "reorder=0.05,delay_us=100"
          "dup=0.05,corrupt=0.02" "loss=0.01,reorder=0.01,dup=0.01,corrupt=0.005,delay_us=50")
declare -A stat=()
rounds=0 bytes=0 sim_bytes=0 pingpongs=0 verbs_cases=0 sims=0 hostile=0 shm_rounds=0 shm_bytes=0
add_stats() { # accumulate "softrdma: stats k=v ..." lines from a log
  while read -r line; do
    for kv in ${line#softrdma: stats }; do
      k=${kv%%=*}; v=${kv#*=}
      [[ $v =~ ^[0-9]+$ ]] || continue # a tool's output run into the line
      stat[$k]=$(( ${stat[$k]:-0} + v ))
    done
  done < <(grep -h "softrdma: stats" "$@" 2>/dev/null || true)
}
fail() { echo "SOAK FAILURE in round $rounds: $1"; cat "$log"/* 2>/dev/null | tail -60; exit 1; }

end=$(( $(date +%s) + secs ))
port=20000
while [ "$(date +%s)" -lt "$end" ]; do
  rounds=$((rounds + 1))
  prof=${profiles[$((RANDOM % ${#profiles[@]}))]},seed=$RANDOM
  case $((RANDOM % 5)) in
  0) # Debian's pingpong, data validated
    sizes=(1 100 4096 8192 65536 1048576); size=${sizes[$((RANDOM % 6))]}
    iters=$(( size >= 65536 ? 10 : 100 ))
    port=$(( port >= 20900 ? 20000 : port + 1 ))
    SOFTRDMA_FAULT=$prof SOFTRDMA_STATS=1 tests/conformance/pingpong.sh "$lib" $port \
      ibv_rc_pingpong -g 0 -c -s $size -n $iters > "$log/pp" 2>&1 || fail "ibv_rc_pingpong -s $size ($prof)"
    add_stats "$log/pp"
    bytes=$(( bytes + 2 * size * iters )); pingpongs=$((pingpongs + 1)) ;;
  1) # verbs programs' data cases
    cases=(xfer atomic sge inline rd_atomic unsignaled)
    c=${cases[$((RANDOM % ${#cases[@]}))]}
    SOFTRDMA_FAULT=$prof SOFTRDMA_STATS=1 LD_LIBRARY_PATH=$lib timeout 300 "$bin/verbs_ops_test" "$c" \
      > "$log/ops" 2>&1 || fail "verbs_ops_test $c ($prof)"
    add_stats "$log/ops"
    verbs_cases=$((verbs_cases + 1)) ;;
  2) # simulator, every operation
    ops=(send write write_imm read cas faa)
    op=${ops[$((RANDOM % 6))]}
    sizes=(1 4099 65536 1M); size=${sizes[$((RANDOM % 4))]}
    [ "$op" = cas ] || [ "$op" = faa ] && size=8
    loss=0.0$((RANDOM % 10))
    "$bin/srdma-sim" --op $op --size $size --count 20 --depth 4 --loss $loss --reorder 0.01 \
      --dup 0.01 --corrupt 0.001 --window 64 --seed $RANDOM > "$log/sim" 2>&1 || fail "srdma-sim $op $size loss $loss"
    b=$(sed -n 's/.*(\([0-9.]*\) MiB of payload).*/\1/p' "$log/sim")
    sim_bytes=$(awk -v a=$sim_bytes -v b=${b:-0} 'BEGIN{printf "%d", a + b * 1048576}')
    sims=$((sims + 1)) ;;
  3) # forged packets against a live device, if that test is built
    if [ -x "$bin/hostile_attacker" ]; then
      LD_LIBRARY_PATH=$lib timeout 300 "$bin/hostile_attacker" "$bin/hostile_victim" both > "$log/hostile" 2>&1 || fail "hostile_attacker"
      hostile=$((hostile + 1))
    fi ;;
  4) # shared memory
    port=$(( port >= 20900 ? 20000 : port + 1 ))
    case $((RANDOM % 3)) in
    0)
      sizes=(1 100 4096 8192 65536 1048576); size=${sizes[$((RANDOM % 6))]}
      iters=$(( size >= 65536 ? 50 : 500 ))
      SOFTRDMA_STATS=1 tests/conformance/pingpong.sh "$lib" $port \
        ibv_rc_pingpong -g 0 -c -s $size -n $iters > "$log/shm" 2>&1 || fail "shm ibv_rc_pingpong -s $size"
      shm_bytes=$(( shm_bytes + 2 * size * iters )) ;;
    1)
      cases=(xfer atomic sge inline rd_atomic unsignaled)
      c=${cases[$((RANDOM % ${#cases[@]}))]}
      SOFTRDMA_STATS=1 LD_LIBRARY_PATH=$lib timeout 300 "$bin/verbs_ops_test" "$c" \
        > "$log/shm" 2>&1 || fail "shm verbs_ops_test $c" ;;
    2)
      SOFTRDMA_STATS=1 tests/conformance/perftest.sh "$lib" $port ib_write_bw -q 4 -s 1048576 -n 200 \
        > "$log/shm" 2>&1 || fail "shm ib_write_bw -q 4" ;;
    esac
    grep -q 'shm_rx_pkts=[1-9]' "$log/shm" || fail "round did not use shared memory"
    add_stats "$log/shm"
    shm_rounds=$((shm_rounds + 1)) ;;
  esac
done
echo "soak: $secs s, $rounds rounds, seed ${SOAK_SEED:-1}"
echo "  ibv_rc_pingpong -c runs:     $pingpongs ($((bytes / 1048576)) MiB validated over UDP)"
echo "  verbs data cases:            $verbs_cases"
echo "  simulated transfers:         $sims ($((sim_bytes / 1048576)) MiB verified)"
echo "  hostile runs:                $hostile"
echo "  shared-memory rounds:        $shm_rounds ($((shm_bytes / 1048576)) MiB validated by ibv_rc_pingpong; ${stat[shm_rx_pkts]:-0} packets received, ${stat[shm_tx_drops]:-0} dropped)"
echo "  faults injected (UDP):       lost ${stat[fault_lost]:-0}, duplicated ${stat[fault_dup]:-0}, reordered ${stat[fault_reordered]:-0}, corrupted ${stat[fault_corrupted]:-0}, delayed ${stat[fault_delayed]:-0}"
echo "  caught by the ICRC:          ${stat[icrc_drops]:-0}"
echo "  repaired by:                 ${stat[retransmits]:-0} retransmitted packets, ${stat[timeouts]:-0} timeouts, ${stat[seq_naks]:-0} sequence NAKs"
echo "  errors found:                0"
