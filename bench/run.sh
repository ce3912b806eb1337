#!/usr/bin/env bash
# bench/run.sh: softrdma held against this machine's own limits, in one run.
#
# Measures every point BENCH_REPS times (default 5), the repetitions
# interleaved so that drifts in machine load hit all points alike, and
# prints one table of medians plus the ratios the performance targets are
# stated in (docs/PERFORMANCE.md):
#   - raw loopback UDP between two processes (build's srdma-udpbench):
#     4 KiB datagrams, UDP GSO+GRO, busy-poll ping-pong of 32 B, and the
#     same ping-pong with a 20 B ACK riding in each send (one GSO send of two
#     segments: the shape an RC ping-pong's packets must take), received
#     with plain recv and as softrdma's UDP driver must receive (recvmmsg
#     with source addresses and GRO control messages): the floor under
#     ib_write_lat before any transport work;
#   - softrdma under Debian's unmodified perftest over its UDP path
#     (SOFTRDMA_SHM=0), the path the targets are stated for:
#     ib_{write,read,send}_bw at 64 B, 4 KiB, 64 KiB, 1 MiB;
#     ib_{write,send,read}_lat at 2 B and 4 KiB; 64 B message rate with 1
#     and 4 QPs;
#   - the same-host limits of the shared-memory path (srdma-udpbench: one
#     core's memcpy into a ring, a cache line's round trip between two
#     processes, memcpy into memory both processes map against
#     process_vm_writev/readv of memory only one of them owns, and one
#     2-byte process_vm_writev) and softrdma over it (the default between processes on one
#     host): ib_{write,read,send}_bw at 4 KiB, 64 KiB, 1 MiB, the 64 B
#     message rate, ib_{write,send,read}_lat at 2 B;
#     The same-host bandwidth points also run with SOFTRDMA_SHM_BULK=0
#     (every byte through the rings, no copy by reference) beside the
#     default (sr_bulk.h: 32 KiB and more copied once by the responder);
#   - UCX over TCP (ucx_perftest, UCX_TLS=tcp on lo): ucp_put_bw, ucp_get and
#     tag_bw at the same sizes, ucp_put_lat at 2 B and 4 KiB;
#   - UCX over its shared-memory transports (UCX_TLS=sm): the same-host
#     peer the shm rows are held against (ucp_put_bw, ucp_get, tag_bw at
#     64 B, 64 KiB, 1 MiB; ucp_put_lat at 2 B);
#   - CPU used by an idle softrdma process (srdma-idle-probe).
# A benchmark, not a test: never part of ctest; the figures belong to the
# machine and to its load, which is recorded alongside them.
#
# Environment:
#   BENCH_REPS     repetitions of each point (5)
#   BENCH_SECONDS  length of each bandwidth point, perftest -D (2)
#   BENCH_BUILD    build directory used (build-bench, apart from build/)
#   BENCH_PORT     first TCP port for the perftest/UCX rendezvous (21000)
#   BENCH_QUIET_PCT, BENCH_QUIET_WAIT  wait at most WAIT seconds (120) for
#                  the machine to be less than PCT % busy (30) before starting
#   BENCH_PROFILE  1: also perf-record one ib_write_bw 64 KiB run (0)
#   BENCH_OUT      report file (bench/results/<UTC timestamp>.txt)
#   BENCH_SET      all (default), or shm: only the same-host points (softrdma
#                  over shared memory, with and without references, and UCX sm)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
reps=${BENCH_REPS:-5}
secs=${BENCH_SECONDS:-2}
build=${BENCH_BUILD:-$root/build-bench}
port=${BENCH_PORT:-21000}
port_end=$((port + 2000))
quiet_pct=${BENCH_QUIET_PCT:-30}
quiet_wait=${BENCH_QUIET_WAIT:-120}
profile=${BENCH_PROFILE:-0}
set_=${BENCH_SET:-all}
[[ $set_ == all || $set_ == shm ]] || { echo "bench: BENCH_SET must be all or shm" >&2; exit 2; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${BENCH_OUT:-$root/bench/results/$stamp.txt}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "bench: BENCH_REPS must be a positive integer" >&2; exit 2; }
[[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "bench: BENCH_SECONDS must be a positive integer" >&2; exit 2; }
[[ $quiet_pct =~ ^[0-9]+$ && $quiet_wait =~ ^[0-9]+$ ]] ||
  { echo "bench: BENCH_QUIET_PCT and BENCH_QUIET_WAIT must be integers" >&2; exit 2; }

tmp=$(mktemp -d)
srv_pid=
cleanup() {
  if [ ! -e "$out" ] && [ -s "$tmp/raw" ]; then
    mkdir -p "$(dirname "$out")"
    cp "$tmp/raw" "$out.partial" && echo "bench: stopped early; raw values in $out.partial" >&2
  fi
  if [ -n "$srv_pid" ]; then
    kill "$srv_pid" 2>/dev/null || true
    wait "$srv_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "bench: $*" >&2; }
raw=$tmp/raw  # "key rep value" lines
notes=$tmp/notes
: >"$raw"
: >"$notes"
note() { echo "$*" >>"$notes"; log "$*"; }

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
for p in build-essential cmake libibverbs-dev perftest iproute2; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt_install "${need[@]}" || { cat "$tmp/apt.log" >&2; log "cannot install ${need[*]}"; exit 1; }
fi
have_pkg ucx-utils || apt_install ucx-utils || true
ucx_ok=1
command -v ucx_perftest >/dev/null || { ucx_ok=0; note "UCX: ucx_perftest not available (apt-get install ucx-utils failed); UCX columns are empty"; }
if [ "$profile" = 1 ]; then
  have_pkg linux-perf || apt_install linux-perf || true
fi

log "building in $build"
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" --target ibverbs stub_mlx5 stub_efa >"$tmp/build.log" 2>&1 ||
  { tail -40 "$tmp/build.log" >&2; exit 1; }
lib=$build/lib
cmake --build "$build" --target help >"$tmp/targets" 2>/dev/null || true
if grep -q srdma-udpbench "$tmp/targets"; then
  cmake --build "$build" -j"$(nproc)" --target srdma-udpbench srdma-idle-probe >"$tmp/build.log" 2>&1 ||
    { tail -40 "$tmp/build.log" >&2; exit 1; }
  udpbench=$build/bin/srdma-udpbench
  idleprobe=$build/bin/srdma-idle-probe
else
  # tools/CMakeLists.txt without add_subdirectory(udpbench): build by hand.
  cc -std=c11 -O2 -D_GNU_SOURCE -Wall -o "$tmp/srdma-udpbench" "$root/tools/udpbench/udpbench.c"
  cc -std=c11 -O2 -D_GNU_SOURCE -Wall -o "$tmp/srdma-idle-probe" \
    "$root/tools/udpbench/idle_probe.c" -L"$lib" -libverbs
  udpbench=$tmp/srdma-udpbench
  idleprobe=$tmp/srdma-idle-probe
fi
[ -e "$lib/libibverbs.so.1" ] || { log "no $lib/libibverbs.so.1"; exit 1; }

# ---- helpers ----------------------------------------------------------------

# Whole-machine busy percentage over $1 seconds (/proc/stat: user nice system
# idle iowait irq softirq steal).
cpu_busy_pct() {
  local a b
  a=$(head -1 /proc/stat)
  sleep "$1"
  b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    split(a, x); split(b, y); t = 0
    for (i = 2; i <= 9; i++) t += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6])
    printf "%.0f\n", (t > 0 ? 100 * (t - idle) / t : 0) }'
}

# record KEY VALUE: one measurement; anything but a finite number (perftest
# prints "inf" when its clock calibration fails under load) is left out.
record() {
  if [[ $2 =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then
    echo "$1 $rep $2" >>"$raw"
  else
    note "rep $rep: $1: unusable value '$2' left out"
  fi
}
listening() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null || true)" ]; }

next_port() {
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    port=$((port + 1))
    [ "$port" -lt "$port_end" ] || { log "out of TCP ports"; exit 1; }
    listening "$port" || return 0
  done
  log "no free TCP port"
  exit 1
}

# pair TAG CMD...: server "CMD -p PORT", then client "CMD -p PORT 127.0.0.1";
# the client's output goes to $tmp/TAG. CMD is an external command (so that
# $! is its pid) and should start with `timeout`.
pair() {
  local tag=$1 rc=0 src=0 i
  shift
  next_port
  "$@" -p "$port" >"$tmp/$tag.srv" 2>&1 &
  srv_pid=$!
  for ((i = 0; i < 200; i++)); do
    if listening "$port" || ! kill -0 "$srv_pid" 2>/dev/null; then
      break
    fi
    sleep 0.05
  done
  "$@" -p "$port" 127.0.0.1 >"$tmp/$tag" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    kill "$srv_pid" 2>/dev/null || true
  fi
  wait "$srv_pid" || src=$?
  srv_pid=
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then
    note "rep $rep: $tag failed (client exit $rc, server $src): $(awk 'NF { l = $0 } END { print l }' "$tmp/$tag")"
    return 1
  fi
}

pt=(timeout 30 env LD_LIBRARY_PATH="$lib")
ptl=(timeout 60 env LD_LIBRARY_PATH="$lib") # ping-pongs crawl when other processes spin
shm=0 # the path sr_bw and sr_lat measure: 0 UDP (#5's targets), 1 shared memory
shm_bulk=32768 # SOFTRDMA_SHM_BULK: the default; 0: every byte through the rings
ucx_tcp=(timeout 40 env UCX_TLS=tcp UCX_NET_DEVICES=lo ucx_perftest)
ucx_sm=(timeout 40 env UCX_TLS=sm ucx_perftest)
ucx=("${ucx_tcp[@]}")

# perftest runs with -F: on a loaded machine its CPU-frequency check would
# otherwise fail runs (as in tests/conformance/perftest.sh).
# perftest bandwidth: Gb/s (10^9 bit) and message rate (Mpps).
sr_bw() {
  local prog=$1 size=$2 key=$3
  shift 3
  pair "$key" "${pt[@]}" SOFTRDMA_SHM=$shm SOFTRDMA_SHM_BULK=$shm_bulk "$prog" -F -x 0 -s "$size" \
    -D "$secs" --report_gbits "$@" ||
    return 0
  local line
  line=$(awk '/#bytes/ { getline; print $4, $5; exit }' "$tmp/$key")
  [ -n "$line" ] || { note "rep $rep: $key: no result row"; return 0; }
  record "$key" "${line% *}"
  record "${key}_mpps" "${line#* }"
}

# perftest latency: t_typical (the median) and the 99th percentile, in us.
sr_lat() {
  local prog=$1 size=$2 key=$3 line
  pair "$key" "${ptl[@]}" SOFTRDMA_SHM=$shm "$prog" -F -x 0 -s "$size" -n 5000 || return 0
  line=$(awk '/#bytes/ { getline; print $5, $8; exit }' "$tmp/$key")
  [ -n "$line" ] || { note "rep $rep: $key: no result row"; return 0; }
  record "$key" "${line% *}"
  record "${key}_p99" "${line#* }"
}

# ucx_perftest: the final CSV row (iterations, p50 latency us, avg latency,
# overall latency, avg MB/s, overall MB/s (2^20 B), avg msg/s, overall msg/s).
ucx_run() {
  local test=$1 size=$2 iters=$3 key=$4 row
  shift 4
  [ "$ucx_ok" = 1 ] || return 0
  pair "$key" "${ucx[@]}" -t "$test" -s "$size" -n "$iters" -w $((iters / 10)) -f -v "$@" || return 0
  row=$(awk '/^[0-9]+,/ { r = $0 } END { print r }' "$tmp/$key")
  [ -n "$row" ] || { note "rep $rep: $key: no result row"; return 0; }
  case $test in
  *lat) record "$key" "$(echo "$row" | cut -d, -f2)" ;;
  *)
    record "$key" "$(echo "$row" | awk -F, '{ printf "%.3f", $6 * 1048576 * 8 / 1e9 }')"
    record "${key}_mpps" "$(echo "$row" | awk -F, '{ printf "%.6f", $8 / 1e6 }')"
    ;;
  esac
}

sizes=(64 4096 65536 1048576)
declare -A label=([2]="2 B" [64]="64 B" [4096]="4 KiB" [65536]="64 KiB" [1048576]="1 MiB")
# UCX iterations per size, for about a second each on a quiet machine.
declare -A it_put=([64]=1000000 [4096]=200000 [65536]=40000 [1048576]=3000)
declare -A it_get=([64]=50000 [4096]=50000 [65536]=20000 [1048576]=2000)
declare -A it_tag=([64]=500000 [4096]=200000 [65536]=40000 [1048576]=3000)

# The same-host points, one repetition: softrdma over shared memory (by
# reference and through the rings alone), then UCX's sm transports.
same_host() {
  log "rep $rep/$reps: same-host limits"
  local m
  for m in memcpy shmpingpong cma; do
    if "$udpbench" -m "$m" -t 1 -n 100000 >"$tmp/lim" 2>"$tmp/lim.err"; then :; else
      note "rep $rep: udpbench -m $m: $(tail -1 "$tmp/lim.err")"
    fi
    while read -r k v; do
      case $k in
      memcpy_4k_gbps | shm_half_rtt_us | shared_memcpy_* | cma_*) record "$k" "$v" ;;
      esac
    done <"$tmp/lim"
  done
  log "rep $rep/$reps: softrdma over shared memory"
  shm=1
  for s in 4096 65536 1048576; do
    sr_bw ib_write_bw "$s" "shm_write_bw_$s"
    sr_bw ib_read_bw "$s" "shm_read_bw_$s"
    sr_bw ib_send_bw "$s" "shm_send_bw_$s"
  done
  shm_bulk=0
  for s in 65536 1048576; do
    sr_bw ib_write_bw "$s" "shmring_write_bw_$s"
    sr_bw ib_send_bw "$s" "shmring_send_bw_$s"
  done
  shm_bulk=32768
  sr_bw ib_write_bw 64 shm_write_bw_64
  for op in write send read; do
    sr_lat "ib_${op}_lat" 2 "shm_${op}_lat_2"
  done
  shm=0
  log "rep $rep/$reps: UCX over shared memory"
  ucx=("${ucx_sm[@]}")
  for s in 64 65536 1048576; do
    ucx_run ucp_put_bw "$s" "${it_put[$s]}" "ucxsm_put_bw_$s" -O 128
    ucx_run ucp_get "$s" "${it_get[$s]}" "ucxsm_get_bw_$s" -O 128
    ucx_run tag_bw "$s" "${it_tag[$s]}" "ucxsm_tag_bw_$s" -O 128
  done
  ucx_run ucp_put_lat 2 20000 "ucxsm_put_lat_2"
  ucx=("${ucx_tcp[@]}")
}

# ---- the run ----------------------------------------------------------------

busy=100
for ((i = 0; i < quiet_wait / 2 + 1; i++)); do
  busy=$(cpu_busy_pct 2)
  if [ "$busy" -lt "$quiet_pct" ]; then
    break
  fi
  if [ "$i" -eq 0 ]; then
    log "machine ${busy}% busy; waiting up to ${quiet_wait}s for < ${quiet_pct}%"
  fi
done
if [ "$busy" -ge "$quiet_pct" ]; then
  note "started with the machine ${busy}% busy (other processes)"
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)

for ((rep = 1; rep <= reps; rep++)); do
  record busy_before_pct "$(cpu_busy_pct 1)"
  if [ "$set_" = shm ]; then
    same_host
    continue
  fi
  log "rep $rep/$reps: UDP limits"
  # the same-host limits come with same_host()
  for m in plain gso pingpong pingack pingackrx; do
    "$udpbench" -m "$m" -t "$secs" -n 100000 || note "rep $rep: udpbench -m $m failed"
  done >"$tmp/udp" 2>"$tmp/udp.err"
  while read -r k v; do
    case $k in
    udp_plain_4k_gbps | udp_gso_gro_4k_gbps | udp_plain_4k_loss_pct | udp_gso_gro_4k_loss_pct | \
      udp_half_rtt_us | udp_pingpong_32b_rtt_us | udp_pingpong_32b_rtt_p99_us | \
      udp_ack_half_rtt_us | udp_pingack_32b_rtt_us | udp_ackrx_half_rtt_us | udp_pingackrx_32b_rtt_us)
      record "$k" "$v"
      ;;
    esac
  done <"$tmp/udp"

  log "rep $rep/$reps: softrdma bandwidth"
  for s in "${sizes[@]}"; do
    sr_bw ib_write_bw "$s" "sr_write_bw_$s"
    sr_bw ib_read_bw "$s" "sr_read_bw_$s"
    sr_bw ib_send_bw "$s" "sr_send_bw_$s"
  done
  sr_bw ib_write_bw 64 sr_write_bw_64_q4 -q 4

  log "rep $rep/$reps: softrdma latency"
  for s in 2 4096; do
    sr_lat ib_write_lat "$s" "sr_write_lat_$s"
    sr_lat ib_send_lat "$s" "sr_send_lat_$s"
    sr_lat ib_read_lat "$s" "sr_read_lat_$s"
  done

  same_host

  log "rep $rep/$reps: UCX over TCP"
  for s in "${sizes[@]}"; do
    # -O 128: as many operations in flight as perftest's default TX depth
    ucx_run ucp_put_bw "$s" "${it_put[$s]}" "ucx_put_bw_$s" -O 128
    ucx_run ucp_get "$s" "${it_get[$s]}" "ucx_get_bw_$s" -O 128
    ucx_run tag_bw "$s" "${it_tag[$s]}" "ucx_tag_bw_$s" -O 128
  done
  for s in 2 4096; do
    ucx_run ucp_put_lat "$s" 5000 "ucx_put_lat_$s"
  done

  log "rep $rep/$reps: idle CPU"
  if LD_LIBRARY_PATH=$lib timeout 30 "$idleprobe" 5 >"$tmp/idle" 2>"$tmp/idle.err"; then
    while read -r k v; do
      case $k in idle_cpu_pct | idle_cpu_ms | idle_ctx_switches) record "$k" "$v" ;; esac
    done <"$tmp/idle"
  else
    note "rep $rep: idle probe: $(tail -1 "$tmp/idle.err")"
  fi
done
t_end=$(date +%s)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the report -------------------------------------------------------------

# stats KEY: "median min max n", or "n/a n/a n/a 0".
stats() {
  awk -v k="$1" '$1 == k { print $3 }' "$raw" | sort -g | awk '
    { a[NR] = $1 }
    END {
      if (NR == 0) { print "n/a n/a n/a 0"; exit }
      m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      print m, a[1], a[NR], NR }'
}
med() { stats "$1" | cut -d' ' -f1; }

report=$tmp/report
{
  echo "softrdma benchmark  $stamp  (bench/run.sh, BENCH_REPS=$reps, BENCH_SECONDS=$secs)"
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
  echo "source:  $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    "($(git -C "$root" --no-optional-locks status --porcelain 2>/dev/null | wc -l) paths modified), build $build"
  echo "tools:   perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)," \
    "ucx $(dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null || echo none)"
  echo "load:    loadavg $load_start at start, $load_end at end; $((t_end - t_start)) s;" \
    "machine busy before each rep (median of 1 s samples): $(med busy_before_pct)%"
  echo
  printf '%-44s %10s %10s %10s  %s\n' "point" "median" "min" "max" "unit (n)"
  row() { # row LABEL KEY UNIT
    local s
    read -r -a s <<<"$(stats "$2")"
    printf '%-44s %10s %10s %10s  %s (%s)\n' "$1" "${s[0]}" "${s[1]}" "${s[2]}" "$3" "${s[3]}"
  }
  echo "-- loopback UDP, two processes (srdma-udpbench)"
  row "UDP 4 KiB datagrams, sendmmsg/recvmmsg" udp_plain_4k_gbps Gb/s
  row "  receiver loss" udp_plain_4k_loss_pct %
  row "UDP GSO+GRO (60 KiB of 4 KiB segments)" udp_gso_gro_4k_gbps Gb/s
  row "  receiver loss" udp_gso_gro_4k_loss_pct %
  row "UDP 32 B busy-poll round trip" udp_pingpong_32b_rtt_us us
  row "  99th percentile" udp_pingpong_32b_rtt_p99_us us
  row "UDP half round trip" udp_half_rtt_us us
  row "UDP 32 B round trip, each with a 20 B ACK" udp_pingack_32b_rtt_us us
  row "  its half round trip" udp_ack_half_rtt_us us
  row "  the same received as softrdma must (pingackrx)" udp_ackrx_half_rtt_us us
  echo "-- softrdma, perftest (Gb/s = 10^9 bit/s)"
  for op in write read send; do
    for s in "${sizes[@]}"; do row "ib_${op}_bw ${label[$s]}" "sr_${op}_bw_$s" Gb/s; done
  done
  row "ib_write_bw 64 B message rate, 1 QP" sr_write_bw_64_mpps Mpps
  row "ib_write_bw 64 B message rate, -q 4" sr_write_bw_64_q4_mpps Mpps
  for op in write send read; do
    for s in 2 4096; do
      row "ib_${op}_lat ${label[$s]} (typical)" "sr_${op}_lat_$s" us
      row "  99th percentile" "sr_${op}_lat_${s}_p99" us
    done
  done
  echo "   (ib_write_lat/ib_send_lat report half the round trip, ib_read_lat the whole READ)"
  echo "-- same host, shared memory (srdma-udpbench; softrdma's default between local processes)"
  row "memcpy 4 KiB pieces into a 4 MiB ring, 1 core" memcpy_4k_gbps Gb/s
  row "cache-line half round trip, 2 processes" shm_half_rtt_us us
  for s in 64k 1m; do
    row "memcpy $s into memory both map (UCX posix/sysv)" "shared_memcpy_${s}_gbps" Gb/s
    row "process_vm_writev $s, unshared memory" "cma_write_${s}_gbps" Gb/s
    row "process_vm_readv $s, unshared memory" "cma_read_${s}_gbps" Gb/s
  done
  row "process_vm_writev 2 B, one call" cma_write_2b_us us
  for op in write read send; do
    for s in 4096 65536 1048576; do row "shm ib_${op}_bw ${label[$s]}" "shm_${op}_bw_$s" Gb/s; done
  done
  for op in write send; do
    for s in 65536 1048576; do
      row "shm ib_${op}_bw ${label[$s]}, rings only" "shmring_${op}_bw_$s" Gb/s
    done
  done
  row "shm ib_write_bw 64 B message rate, 1 QP" shm_write_bw_64_mpps Mpps
  for op in write send read; do
    row "shm ib_${op}_lat 2 B (typical)" "shm_${op}_lat_2" us
    row "  99th percentile" "shm_${op}_lat_2_p99" us
  done
  echo "-- UCX over shared memory (ucx_perftest, UCX_TLS=sm)"
  for t in put get tag; do
    for s in 64 65536 1048576; do row "ucx sm ${t}_bw ${label[$s]}" "ucxsm_${t}_bw_$s" Gb/s; done
  done
  row "ucx sm put_bw 64 B message rate" ucxsm_put_bw_64_mpps Mpps
  row "ucx sm put_lat 2 B (median)" ucxsm_put_lat_2 us
  echo "-- UCX over TCP on lo (ucx_perftest, UCX_TLS=tcp)"
  for t in put get tag; do
    for s in "${sizes[@]}"; do row "ucx ${t}_bw ${label[$s]}" "ucx_${t}_bw_$s" Gb/s; done
  done
  row "ucx put_bw 64 B message rate" ucx_put_bw_64_mpps Mpps
  for s in 2 4096; do row "ucx put_lat ${label[$s]} (median)" "ucx_put_lat_$s" us; done
  echo "-- idle softrdma process (device, PD, CQ, RC QP open; 5 s asleep)"
  row "CPU time used" idle_cpu_ms ms
  row "CPU use" idle_cpu_pct "% of a core"
  row "context switches (all threads)" idle_ctx_switches ""
  echo
  echo "ratios of medians (this run)"
  printf '%-44s %8s  %-16s %s\n' "ratio" "value" "target" "verdict"
  # ratio LABEL NUM_KEY DEN_KEY OP TARGET [GOAL]
  ratio() {
    local n d
    n=$(med "$2")
    d=$(med "$3")
    awk -v l="$1" -v n="$n" -v d="$d" -v op="$4" -v t="$5" -v g="${6:-}" 'BEGIN {
      if (n == "n/a" || d == "n/a" || d + 0 == 0) {
        printf "%-44s %8s  %-16s %s\n", l, "n/a", op " " t, "not measured"; exit }
      r = n / d
      met = op == ">=" ? r >= t : r <= t
      by = op == ">=" ? r / t : t / r
      v = met ? sprintf("met (%.2fx the target)", by) : sprintf("NOT met (%.2fx the target)", by)
      if (g != "") v = v sprintf("; goal %s: %s", g, r >= g ? "met" : "not met")
      printf "%-44s %8.3f  %-16s %s\n", l, r, op " " t, v }'
  }
  ratio "ib_write_bw 64 KiB / UDP GSO+GRO" sr_write_bw_65536 udp_gso_gro_4k_gbps ">=" 0.6 0.9
  ratio "ib_read_bw 64 KiB / UDP GSO+GRO" sr_read_bw_65536 udp_gso_gro_4k_gbps ">=" 0.5
  ratio "ib_write_lat 2 B / UDP half round trip" sr_write_lat_2 udp_half_rtt_us "<=" 1.5
  ratio "  / the same with an ACK per message (info)" sr_write_lat_2 udp_ack_half_rtt_us "<=" 1.5
  ratio "UDP with an ACK / without (info)" udp_ack_half_rtt_us udp_half_rtt_us "<=" 1.5
  ratio "  received as softrdma must / without (info)" udp_ackrx_half_rtt_us udp_half_rtt_us "<=" 1.5
  ratio "ib_write_lat 2 B / that floor (info)" sr_write_lat_2 udp_ackrx_half_rtt_us "<=" 1.5
  ratio "ib_write_bw 64 KiB / UDP 4 KiB plain (info)" sr_write_bw_65536 udp_plain_4k_gbps ">=" 0.6
  for pair_ in write:put read:get send:tag; do
    for s in "${sizes[@]}"; do
      ratio "ib_${pair_%%:*}_bw / ucx ${pair_#*:}_bw ${label[$s]}" \
        "sr_${pair_%%:*}_bw_$s" "ucx_${pair_#*:}_bw_$s" ">=" 1
    done
  done
  ratio "ib_write_bw 64 B msg rate / ucx put_bw (info)" sr_write_bw_64_mpps ucx_put_bw_64_mpps ">=" 1
  ratio "shm ib_write_bw 64 KiB / memcpy (info)" shm_write_bw_65536 memcpy_4k_gbps ">=" 0.5
  ratio "shm ib_read_bw 64 KiB / memcpy (info)" shm_read_bw_65536 memcpy_4k_gbps ">=" 0.5
  ratio "shm ib_write_bw 64 KiB / UDP path (info)" shm_write_bw_65536 sr_write_bw_65536 ">=" 1
  ratio "shm ib_write_lat 2 B / shm half RTT (info)" shm_write_lat_2 shm_half_rtt_us "<=" 1.5
  ratio "shm ib_write_lat 2 B / UDP half RTT (info)" shm_write_lat_2 udp_half_rtt_us "<=" 1.5
  ratio "ib_write_lat 2 B / ucx put_lat 2 B (info)" sr_write_lat_2 ucx_put_lat_2 "<=" 1
  # issue #25: the same-host path against UCX's sm transports
  for pair_ in write:put read:get send:tag; do
    for s in 65536 1048576; do
      ratio "shm ib_${pair_%%:*}_bw / ucx sm ${pair_#*:}_bw ${label[$s]}" \
        "shm_${pair_%%:*}_bw_$s" "ucxsm_${pair_#*:}_bw_$s" ">=" 1
    done
  done
  ratio "shm ib_write_lat 2 B / ucx sm put_lat 2 B" shm_write_lat_2 ucxsm_put_lat_2 "<=" 1.5
  # What stops those: perftest's buffers are its own private memory, which
  # another process reaches only by a kernel copy (CMA); UCX's put stores
  # into memory UCX allocated and both processes map.
  for s in 65536 1048576; do
    k=$([ "$s" = 65536 ] && echo 64k || echo 1m)
    ratio "shm ib_write_bw ${label[$s]} / process_vm_readv (info)" "shm_write_bw_$s" "cma_read_${k}_gbps" ">=" 1
    ratio "process_vm_readv ${label[$s]} / ucx sm put_bw (info)" "cma_read_${k}_gbps" "ucxsm_put_bw_$s" ">=" 1
    ratio "ucx sm put_bw ${label[$s]} / shared memcpy (info)" "ucxsm_put_bw_$s" "shared_memcpy_${k}_gbps" ">=" 1
  done
  ratio "process_vm_writev 2 B / ucx sm put_lat 2 B (info)" cma_write_2b_us ucxsm_put_lat_2 "<=" 1.5
  ratio "cache-line half RTT / ucx sm put_lat 2 B (info)" shm_half_rtt_us ucxsm_put_lat_2 "<=" 1
  ratio "shm 64 B msg rate / ucx sm put_bw 64 B" shm_write_bw_64_mpps ucxsm_put_bw_64_mpps ">=" 1
  for op in write send; do
    for s in 65536 1048576; do
      ratio "shm ib_${op}_bw ${label[$s]} / rings only (info)" "shm_${op}_bw_$s" \
        "shmring_${op}_bw_$s" ">=" 1
    done
  done
  idle=$(med idle_cpu_pct)
  awk -v v="$idle" 'BEGIN {
    if (v == "n/a") { printf "%-44s %8s  %-16s %s\n", "idle CPU", "n/a", "~ 0", "not measured"; exit }
    printf "%-44s %7.4f%%  %-16s %s\n", "idle CPU (% of one core)", v, "< 0.1%",
      (v < 0.1 ? "met" : "NOT met") }'
  if [ -s "$notes" ]; then
    echo
    echo "notes"
    sed 's/^/  /' "$notes"
  fi
} >"$report"

if [ "$profile" = 1 ]; then
  {
    echo
    echo "profile: one ib_write_bw -s 65536 -D $secs run (UDP path) under perf record -e cpu-clock"
    if command -v perf >/dev/null && perf stat -e cpu-clock true >/dev/null 2>&1; then
      rep=profile
      next_port
      LD_LIBRARY_PATH=$lib SOFTRDMA_SHM=0 timeout 60 perf record -q -e cpu-clock -F 4999 -o "$tmp/srv.perf" -- \
        ib_write_bw -F -x 0 -p "$port" -s 65536 -D "$secs" --report_gbits >"$tmp/psrv" 2>&1 &
      srv_pid=$!
      for ((i = 0; i < 200; i++)); do
        if listening "$port"; then
          break
        fi
        sleep 0.05
      done
      LD_LIBRARY_PATH=$lib SOFTRDMA_SHM=0 timeout 60 perf record -q -e cpu-clock -F 4999 -o "$tmp/cli.perf" -- \
        ib_write_bw -F -x 0 -p "$port" -s 65536 -D "$secs" --report_gbits 127.0.0.1 >"$tmp/pcli" 2>&1 ||
        true
      wait "$srv_pid" || true
      srv_pid=
      echo "-- the profiled run's result (perftest: #bytes #iterations peak avg[Gb/s] Mpps)"
      awk '/#bytes/ { getline; print "  " $0; exit }' "$tmp/pcli"
      for side in cli srv; do
        echo "-- $side (requester = cli, responder = srv): CPU-seconds per thread" \
          "(samples / 4999 Hz) over the ${secs} s run"
        { perf script -i "$tmp/$side.perf" -F tid 2>/dev/null || true; } | sort | uniq -c |
          awk '{ printf "     tid %s: %.2f s\n", $2, $1 / 4999 }'
        echo "   top symbols, % of samples"
        { perf report -i "$tmp/$side.perf" --no-children --sort dso,sym --stdio 2>/dev/null ||
          true; } | awk '/^ +[0-9]/ && n++ < 25'
      done
    else
      echo "  perf not usable here"
    fi
  } >>"$report"
fi

mkdir -p "$(dirname "$out")"
{
  cat "$report"
  echo
  echo "raw values (key rep value)"
  cat "$raw"
} >"$out"
cat "$report"
echo
echo "written to $out"
