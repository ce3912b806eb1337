#!/usr/bin/env bash
# openmpi.sh LIBDIR PROG NP SHM: Debian's Open MPI 4.1 with pml ucx over
# srdma0 runs PROG (mpi_check: ping-pong and MPI_Allreduce, all checked)
# on NP ranks; SHM 0 sends softrdma's packets over UDP instead of shared
# memory. UCX may use nothing but rc_verbs/ud_verbs on srdma0:1 (and self):
# the ranks cannot fall back to shared memory or TCP, and pml is forced to
# ucx. SOFTRDMA_STATS shows the packets went through softrdma.
set -u
libdir=$1 prog=$2 np=$3 shm=$4
# shellcheck source=ucx_env.sh
. "$(dirname "$0")/ucx_env.sh"
out=$(timeout -s KILL 240 mpirun --allow-run-as-root --oversubscribe -np "$np" \
  --mca pml ucx --mca btl self --mca pml_ucx_verbose 3 \
  -x LD_LIBRARY_PATH -x UCX_NET_DEVICES=srdma0:1 -x UCX_TLS=rc_verbs,ud_verbs,self \
  -x SOFTRDMA_SHM="$shm" -x SOFTRDMA_STATS=1 "$prog" 2>&1 </dev/null)
rc=$?
printf '%s\n' "$out" | grep -E "mpi_check|softrdma: stats|error|ERROR" | cut -c1-200
[ $rc -eq 0 ] || { echo "FAIL: mpirun exit status $rc"; exit 1; }
grep -q "mpi_check: OK ranks $np " <<<"$out" || { echo "FAIL: no OK from rank 0"; exit 1; }
n=$(grep -c "mca_pml_ucx_init" <<<"$out")
[ "$n" -eq "$np" ] || { echo "FAIL: pml ucx initialised on $n of $np ranks"; exit 1; }
field=shm_rx_pkts; [ "$shm" = 0 ] && field=udp_rx_pkts
busy=$(grep -oE "$field=[1-9][0-9]*" <<<"$out" | wc -l)
[ "$busy" -eq "$np" ] || { echo "FAIL: $busy of $np ranks received over softrdma ($field)"; exit 1; }
echo "OK: $np ranks, pml ucx over srdma0, $field on every rank"
