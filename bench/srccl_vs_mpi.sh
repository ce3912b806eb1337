#!/usr/bin/env bash
# bench/srccl_vs_mpi.sh: srccl's all-reduce against Open MPI's, in one run.
#
# For 2 and 4 ranks on this host, float sum, 8 B to 64 MiB (x2 steps):
#   - srccl-udp: srccl-perf under srccl-run, over softrdma's UDP path
#     (LD_LIBRARY_PATH=<build>/lib SOFTRDMA_SHM=0 SRCCL_SHM=0: RoCEv2
#     datagrams on loopback), the path the srccl targets are stated for;
#   - srccl-shm: srccl's own one-host path (SRCCL_SHM=1, the default when
#     every rank is on one host: all-reduce through shared-memory segments
#     srccl maps, src/srccl/shm.c), held against Open MPI's shared memory;
#   - srccl-qp: srccl over its QPs on softrdma's shared-memory path
#     (SRCCL_SHM=0 SOFTRDMA_SHM=1), the one-host path without shm.c;
#   - Open MPI over TCP: bench/mpi_allreduce.c under
#     mpirun --oversubscribe --allow-run-as-root --mca pml ob1
#            --mca btl tcp,self --mca btl_tcp_if_include lo
#   - Open MPI over shared memory (--mca btl vader,self).
# Both programs print nccl-tests' columns (busbw = algbw * 2(n-1)/n) and
# write them as CSV; each point is measured BENCH_REPS times (interleaved
# runs) and the table gives medians of the out-of-place time and busbw, the
# ratios srccl-udp / OMPI-tcp, srccl-shm / OMPI-shm and srccl-shm / srccl-qp
# busbw per size, and the 8 B latency ratios.
# Small sizes (8 B..32 KiB) run BENCH_SMALL_ITERS timed iterations, large
# ones (64 KiB..64 MiB) BENCH_LARGE_ITERS. A benchmark, not a test.
#
# Environment:
#   BENCH_REPS         repetitions (3)
#   BENCH_RANKS        rank counts ("2 4")
#   BENCH_SMALL_ITERS  timed iterations up to 32 KiB (100; warm-up 10)
#   BENCH_LARGE_ITERS  timed iterations from 64 KiB (5; warm-up 2)
#   BENCH_MAX          largest size (64M)
#   BENCH_BUILD        build directory (build-bench, configured if missing)
#   BENCH_OUT          report (bench/results/srccl-vs-mpi-<UTC timestamp>.txt)
#   BENCH_SET          all (default), or shm: srccl-shm, srccl-qp and OMPI-shm
#                      only (the same-host targets of issue #25; the other
#                      columns are 0), or shm-algo: srccl-shm, OMPI-shm and
#                      srccl's one-host all-reduce forced to one phase
#                      (SRCCL_SHM_SMALL=BENCH_1P_MAX) and to two phases
#                      (SRCCL_SHM_SMALL=0), with a table of the three and the
#                      crossover per rank count (what SRCCL_SHM_SMALL's
#                      default should be)
#   BENCH_1P_MAX       largest one-phase size of shm-algo's 1p runs (4M;
#                      sizes above it run two phases there too)
#   BENCH_BIND         srccl-run --bind for the srccl runs: auto (default:
#                      one CPU per rank when the ranks fit, as mpirun binds
#                      to cores when a job fits), core or none
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
reps=${BENCH_REPS:-3}
ranks=${BENCH_RANKS:-"2 4"}
small_iters=${BENCH_SMALL_ITERS:-100}
large_iters=${BENCH_LARGE_ITERS:-5}
max=${BENCH_MAX:-64M}
build=${BENCH_BUILD:-$root/build-bench}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${BENCH_OUT:-$root/bench/results/srccl-vs-mpi-$stamp.txt}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "bench: BENCH_REPS must be a positive integer" >&2; exit 2; }
impls="srccl-udp ompi-tcp srccl-shm srccl-qp ompi-shm"
case ${BENCH_SET:-all} in
all) ;;
shm) impls="srccl-shm srccl-qp ompi-shm" ;;
shm-algo) impls="srccl-shm srccl-1p srccl-2p ompi-shm" ;;
*) echo "bench: BENCH_SET must be all, shm or shm-algo" >&2; exit 2 ;;
esac
one_max=${BENCH_1P_MAX:-4M}
one_max_b=$(numfmt --from=iec "$one_max") ||
  { echo "bench: BENCH_1P_MAX: a size (4M, 512K, ...)" >&2; exit 2; }
bind=${BENCH_BIND:-auto}
case $bind in
auto | core | none) ;;
*) echo "bench: BENCH_BIND must be auto, core or none" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
log() { echo "bench: $*" >&2; }

# ---- packages and build -----------------------------------------------------
have_pkg() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]; }
apt_install() {
  local sudo=
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || return 1
    sudo=sudo
  fi
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" \
    >"$tmp/apt.log" 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" \
        >"$tmp/apt.log" 2>&1; }
}
need=()
for p in build-essential cmake libibverbs-dev openmpi-bin libopenmpi-dev; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt_install "${need[@]}" || { cat "$tmp/apt.log" >&2; log "cannot install ${need[*]}"; exit 1; }
fi

log "building in $build"
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log" >&2; exit 1; }
cmake --build "$build" -j2 --target ibverbs srccl srccl-perf srccl-run >"$tmp/build.log" 2>&1 ||
  { tail -40 "$tmp/build.log" >&2; exit 1; }
mpicc -std=c11 -O2 -Wall -Wextra -o "$tmp/mpi_allreduce" "$root/bench/mpi_allreduce.c"

# ---- the runs -----------------------------------------------------------------
mpi_common=(mpirun --oversubscribe --allow-run-as-root)
mpi_tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
mpi_shm=(--mca btl vader,self)
small=(-b 8 -e 32K -f 2 -n "$small_iters" -w 10 -c 0)
large=(-b 64K -e "$max" -f 2 -n "$large_iters" -w 2 -c 0)

# run IMPL N REP: both size ranges; rows appended to $tmp/rows as
# "impl n rep size oop_time_us oop_busbw_gbs". A run that fails is tried
# once more (on a loaded machine a QP's retry budget can run out: the
# report says how many retries there were); a second failure stops.
retries=0
run() {
  local impl=$1 n=$2 rep=$3 part args csv try
  for part in small large; do
    if [ "$part" = small ]; then args=("${small[@]}"); else args=("${large[@]}"); fi
    csv=$tmp/$impl-$n-$rep-$part.csv
    for try in 1 2; do
      run_one "$impl" "$n" "$csv" && break
      tail -20 "$tmp/log" >&2
      [ "$try" = 2 ] && { log "$impl -n $n failed twice"; exit 1; }
      log "$impl -n $n failed: once more"
      retries=$((retries + 1))
    done
    awk -F, -v i="$impl" -v n="$n" -v r="$rep" 'NR > 1 { print i, n, r, $1, $6, $8 }' "$csv" \
      >>"$tmp/rows"
  done
}

run_one() {
  local impl=$1 n=$2 csv=$3
  case $impl in
  srccl-udp | srccl-shm | srccl-qp | srccl-1p | srccl-2p)
    local sr_shm=1 sc_shm=1 small=()
    [ "$impl" = srccl-udp ] && sr_shm=0
    [ "$impl" = srccl-udp ] || [ "$impl" = srccl-qp ] && sc_shm=0
    [ "$impl" = srccl-1p ] && small=(SRCCL_SHM_SMALL="$one_max")
    [ "$impl" = srccl-2p ] && small=(SRCCL_SHM_SMALL=0)
    timeout 600 env LD_LIBRARY_PATH="$build/lib" SOFTRDMA_SHM=$sr_shm SRCCL_SHM=$sc_shm \
      "${small[@]}" "$build/bin/srccl-run" -n "$n" -t 590 --bind "$bind" \
      "$build/bin/srccl-perf" "${args[@]}" --csv "$csv" >"$tmp/log" 2>&1 ;;
  ompi-tcp)
    timeout 600 "${mpi_common[@]}" -np "$n" "${mpi_tcp[@]}" "$tmp/mpi_allreduce" \
      "${args[@]}" --csv "$csv" >"$tmp/log" 2>&1 ;;
  ompi-shm)
    timeout 600 "${mpi_common[@]}" -np "$n" "${mpi_shm[@]}" "$tmp/mpi_allreduce" \
      "${args[@]}" --csv "$csv" >"$tmp/log" 2>&1 ;;
  esac
}

: >"$tmp/rows"
start=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((rep = 1; rep <= reps; rep++)); do
  for n in $ranks; do
    for impl in $impls; do
      log "rep $rep/$reps: $impl, $n ranks"
      run "$impl" "$n" "$rep"
    done
  done
done
secs=$(($(date +%s) - start))

# ---- the report -----------------------------------------------------------------
report() {
  echo "# srccl vs Open MPI: all-reduce, float sum, out of place; medians of $reps runs"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $load0 at the start," \
    "$(cut -d' ' -f1-3 /proc/loadavg) at the end; $secs s"
  echo "# commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), build $build," \
    "$(mpirun --version 2>/dev/null | head -1)"
  echo "# iterations: ${small_iters} (8 B..32 KiB), ${large_iters} (64 KiB..$max)"
  echo "# runs that failed and were repeated: $retries"
  echo "# srccl ranks: srccl-run --bind $bind; Open MPI: mpirun's default binding (to cores" \
    "when the ranks fit the CPUs, none when oversubscribed)"
  awk -v ranks="$ranks" '
    function median(key,   k, m, i, j, t, v) {
      m = cnt[key]; if (!m) return -1
      for (i = 1; i <= m; i++) v[i] = val[key, i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    function add(key, x) { cnt[key]++; val[key, cnt[key]] = x }
    function hsize(b) {
      if (b >= 1048576) return sprintf("%d MiB", b / 1048576)
      if (b >= 1024) return sprintf("%d KiB", b / 1024)
      return b " B"
    }
    { add($1 SUBSEP $2 SUBSEP $4 SUBSEP "t", $5); add($1 SUBSEP $2 SUBSEP $4 SUBSEP "bw", $6)
      sizes[$4] = 1 }
    END {
      ns = split(ranks, rs, " ")
      m = 0; for (s in sizes) sz[++m] = s + 0
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (sz[j] < sz[i]) { t = sz[i]; sz[i] = sz[j]; sz[j] = t }
      for (q = 1; q <= ns; q++) {
        n = rs[q]
        printf "\n%d ranks: time (us) and busbw (GB/s)\n\n", n
        printf "| size | srccl-udp us | busbw | OMPI-tcp us | busbw | srccl-shm us | busbw | srccl-qp us | busbw | OMPI-shm us | busbw | udp/OMPI-tcp busbw | shm/OMPI-shm busbw | shm/qp busbw |\n"
        printf "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        met = 0; tot = 0; worst = 1e9; worst_at = ""
        hmet = 0; hworst = 1e9; hworst_at = ""
        for (i = 1; i <= m; i++) {
          s = sz[i]
          st = median("srccl-udp" SUBSEP n SUBSEP s SUBSEP "t"); sb = median("srccl-udp" SUBSEP n SUBSEP s SUBSEP "bw")
          tt = median("ompi-tcp" SUBSEP n SUBSEP s SUBSEP "t"); tb = median("ompi-tcp" SUBSEP n SUBSEP s SUBSEP "bw")
          mt = median("srccl-shm" SUBSEP n SUBSEP s SUBSEP "t"); mb = median("srccl-shm" SUBSEP n SUBSEP s SUBSEP "bw")
          ht = median("ompi-shm" SUBSEP n SUBSEP s SUBSEP "t"); hb = median("ompi-shm" SUBSEP n SUBSEP s SUBSEP "bw")
          qt = median("srccl-qp" SUBSEP n SUBSEP s SUBSEP "t"); qb = median("srccl-qp" SUBSEP n SUBSEP s SUBSEP "bw")
          ratio = tb > 0 ? sb / tb : 0
          hratio = hb > 0 ? mb / hb : 0
          qratio = qb > 0 ? mb / qb : 0
          printf "| %s | %.1f | %.4f | %.1f | %.4f | %.1f | %.4f | %.1f | %.4f | %.1f | %.4f | %.2f | %.2f | %.2f |\n", hsize(s), st, sb, tt, tb, mt, mb, qt, qb, ht, hb, ratio, hratio, qratio
          if (s >= 65536) {
            tot++; if (ratio >= 1) met++; if (hratio >= 1) hmet++
            if (ratio < worst) { worst = ratio; worst_at = hsize(s) }
            if (hratio < hworst) { hworst = hratio; hworst_at = hsize(s) }
          }
          if (s == 8) { lat = tt > 0 ? st / tt : 0; hlat = ht > 0 ? mt / ht : 0; qlat = qt > 0 ? mt / qt : 0 }
        }
        printf "\n%d ranks: srccl-udp busbw >= OMPI-tcp at %d of %d sizes >= 64 KiB (lowest ratio %.2f at %s); 8 B latency srccl-udp/OMPI-tcp = %.2f (target <= 1)\n", n, met, tot, worst, worst_at, lat
        printf "%d ranks: srccl-shm busbw >= OMPI-shm at %d of %d sizes >= 64 KiB (lowest ratio %.2f at %s); 8 B latency srccl-shm/OMPI-shm = %.2f (targets: busbw >= 1 at every size, latency <= 1.5); 8 B latency srccl-shm/srccl-qp = %.2f\n", n, hmet, tot, hworst, hworst_at, hlat, qlat
      }
      if (!("srccl-1p" SUBSEP rs[1] SUBSEP sz[1] SUBSEP "t" in cnt)) exit
      for (q = 1; q <= ns; q++) {
        n = rs[q]
        printf "\n%d ranks, one host by algorithm: time (us); 1p = SRCCL_SHM_SMALL=%s, 2p = SRCCL_SHM_SMALL=0\n\n", n, one_max
        printf "| size | srccl-shm | 1p | 2p | OMPI-shm | 2p/1p time |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n"
        cross = ""
        for (i = 1; i <= m; i++) {
          s = sz[i]
          mt = median("srccl-shm" SUBSEP n SUBSEP s SUBSEP "t")
          ot = median("srccl-1p" SUBSEP n SUBSEP s SUBSEP "t")
          tt = median("srccl-2p" SUBSEP n SUBSEP s SUBSEP "t")
          ht = median("ompi-shm" SUBSEP n SUBSEP s SUBSEP "t")
          printf "| %s | %.1f | %.1f | %.1f | %.1f | %.2f |\n", hsize(s), mt, ot, tt, ht, (ot > 0 ? tt / ot : 0)
          if (s > one_max_b) continue
          if (tt < ot) { if (cross == "") cross = hsize(s) } else cross = ""
        }
        printf "\n%d ranks: two phases faster than one at every size from %s to %s (medians)\n", n, cross == "" ? "none" : cross, one_max
      }
    }' one_max="$one_max" one_max_b="$one_max_b" "$tmp/rows"
}
mkdir -p "$(dirname "$out")"
report | tee "$out"
cp "$tmp/rows" "$out.rows"
log "report in $out (raw rows in $out.rows)"
