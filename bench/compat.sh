#!/usr/bin/env bash
# bench/compat.sh [REPS]: UCX and Open MPI on softrdma's srdma0, held
# against the same programs over TCP and over their own shared memory, in
# one run (docs/COMPATIBILITY.md, "Figures").
#
# Transports, all two processes on this host:
#   sr-shm  softrdma, shared-memory path (the default between local
#           processes): UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=srdma0:1,
#           LD_LIBRARY_PATH=<build>/lib; Open MPI --mca pml ucx on top
#   sr-udp  the same with SOFTRDMA_SHM=0: RoCEv2 datagrams on loopback
#   tcp     UCX_TLS=tcp UCX_NET_DEVICES=lo; Open MPI --mca pml ob1
#           --mca btl self,tcp (lo only)
#   sm      UCX_TLS=posix,sysv,cma; Open MPI --mca pml ob1 --mca btl self,vader
# Points:
#   ucx_perftest (server and client process): tag_lat and ucp_put_lat 8 B,
#   ucp_get 8 B and 64 KiB (one GET in flight: its latency), tag_bw and
#   ucp_put_bw 64 KiB and 1 MiB (-O 128, as bench/run.sh). Latency: the
#   50th percentile; bandwidth: the overall figure.
#   Open MPI, 2 ranks (bench/mpi_compat.c): 8 B ping-pong half round trip,
#   MPI_Allreduce 8 B latency and 1 MiB bandwidth (medians of per-call
#   times).
# Each point is measured REPS times; every repetition runs each point on
# all four transports back to back (their order rotating from one
# repetition to the next), so that drifts in machine load hit the
# transports alike. The tables give the median and min..max per transport
# and the ratios of medians softrdma/peer for the like-for-like pairs:
# sr-udp/tcp (through the kernel's network stack) and sr-shm/sm (through
# memory shared by the two processes). A softrdma figure is kept only if
# the client's SOFTRDMA_STATS show packets received on the path measured
# (shm_rx_pkts or udp_rx_pkts). A benchmark, not a test: never in ctest.
#
# Environment:
#   BENCH_REPS      repetitions when REPS is not given (5)
#   BENCH_BUILD     build directory (build-bench, configured if missing)
#   BENCH_PORT      first TCP port for the ucx_perftest rendezvous (23000)
#   BENCH_QUIET_PCT, BENCH_QUIET_WAIT  wait at most WAIT seconds (120) for
#                   the machine to be less than PCT % busy (30) first
#   BENCH_DEADLINE  start no repetition after this many seconds (3600)
#   BENCH_OUT       report (bench/results/compat-<UTC timestamp>.txt)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-${BENCH_REPS:-5}}
build=${BENCH_BUILD:-$root/build-bench}
port=${BENCH_PORT:-23000}
port_end=$((port + 2000))
quiet_pct=${BENCH_QUIET_PCT:-30}
quiet_wait=${BENCH_QUIET_WAIT:-120}
deadline=${BENCH_DEADLINE:-3600}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${BENCH_OUT:-$root/bench/results/compat-$stamp.txt}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "bench: REPS must be a positive integer" >&2; exit 2; }
[[ $quiet_pct =~ ^[0-9]+$ && $quiet_wait =~ ^[0-9]+$ && $deadline =~ ^[0-9]+$ ]] ||
  { echo "bench: BENCH_QUIET_PCT, BENCH_QUIET_WAIT and BENCH_DEADLINE must be integers" >&2; exit 2; }

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
raw=$tmp/raw # "point transport rep value" lines
notes=$tmp/notes
: >"$raw"
: >"$notes"
note() { echo "$*" >>"$notes"; log "$*"; }

# ---- packages, build, devices -------------------------------------------------

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
for p in build-essential cmake libibverbs-dev ucx-utils openmpi-bin libopenmpi-dev iproute2 python3; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt_install "${need[@]}" || { cat "$tmp/apt.log" >&2; log "cannot install ${need[*]}"; exit 1; }
fi

log "building in $build"
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" --target ibverbs rdmacm stub_mlx5 stub_efa >"$tmp/build.log" 2>&1 ||
  { tail -40 "$tmp/build.log" >&2; exit 1; }
lib=$build/lib
[ -e "$lib/libibverbs.so.1" ] || { log "no $lib/libibverbs.so.1"; exit 1; }
mpicc -std=c11 -O2 -Wall -Wextra -o "$tmp/mpi_compat" "$root/bench/mpi_compat.c"

# What UCX needs before it sees srdma0 (as tests/compat/ucx_env.sh): without
# it the softrdma columns stay empty and the peers are still measured.
sr_ok=1
if ! LD_LIBRARY_PATH=$lib LD_BIND_NOW=1 python3 -c 'import ctypes,sys; ctypes.CDLL(sys.argv[1])' \
  /usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0 2>/dev/null; then
  sr_ok=0
  note "libuct_ib.so.0 does not load with $lib: softrdma columns are empty"
fi
setup=$root/scripts/setup-devices.sh
if [ "$sr_ok" = 1 ] && ! "$setup" --check 2>/dev/null; then
  [ "$(id -u)" -ne 0 ] || "$setup" || true
  "$setup" --check 2>/dev/null || { sr_ok=0; note "run scripts/setup-devices.sh as root: softrdma columns are empty"; }
fi

# ---- helpers ------------------------------------------------------------------

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

# record POINT TRANSPORT VALUE: a finite number, else a note.
record() {
  if [[ $3 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    echo "$1 $2 $rep $3" >>"$raw"
  else
    note "rep $rep: $1 $2: unusable value '$3' left out"
  fi
}

# on_path TRANSPORT FILE: a softrdma run's SOFTRDMA_STATS (in FILE) show
# packets received on the path it was meant to take; peers always pass.
on_path() {
  local field
  case $1 in
  sr-shm) field=shm_rx_pkts ;;
  sr-udp) field=udp_rx_pkts ;;
  *) return 0 ;;
  esac
  grep -qE "$field=[1-9]" "$2"
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

# The environment of each transport (word-split on spaces: $lib has none). `env -u` first, so that nothing the
# caller exported picks the transports instead.
clean_env=(env -u UCX_TLS -u UCX_NET_DEVICES -u SOFTRDMA_SHM -u SOFTRDMA_STATS -u LD_LIBRARY_PATH)
sr_ucx="UCX_TLS=rc_verbs,ud_verbs UCX_NET_DEVICES=srdma0:1 LD_LIBRARY_PATH=$lib SOFTRDMA_STATS=1"
declare -A ucx_env=(
  [sr-shm]="$sr_ucx SOFTRDMA_SHM=1"
  [sr-udp]="$sr_ucx SOFTRDMA_SHM=0"
  [tcp]="UCX_TLS=tcp UCX_NET_DEVICES=lo"
  [sm]="UCX_TLS=posix,sysv,cma"
)
mpi_ucx="--mca pml ucx --mca btl self -x LD_LIBRARY_PATH=$lib -x UCX_NET_DEVICES=srdma0:1"
mpi_ucx+=" -x UCX_TLS=rc_verbs,ud_verbs,self -x SOFTRDMA_STATS=1"
declare -A mpi_args=(
  [sr-shm]="$mpi_ucx -x SOFTRDMA_SHM=1"
  [sr-udp]="$mpi_ucx -x SOFTRDMA_SHM=0"
  [tcp]="--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo"
  [sm]="--mca pml ob1 --mca btl self,vader"
)
transports=(sr-shm sr-udp tcp sm)
order=("${transports[@]}")
row=

# ucx_once TRANSPORT TEST SIZE ITERS: one ucx_perftest pair; sets row to
# its final CSV row (iterations, p50 latency us, avg latency, overall latency,
# avg MB/s, overall MB/s (2^20 B), avg msg/s, overall msg/s), or fails.
ucx_once() {
  local tr=$1 test=$2 size=$3 iters=$4 rc=0 src=0 i
  local -a e cmd
  read -r -a e <<<"${ucx_env[$tr]}"
  cmd=(timeout 60 "${clean_env[@]}" "${e[@]}" ucx_perftest -t "$test" -s "$size" -n "$iters"
    -w $((iters / 10)) -f -v)
  case $test in *_bw) cmd+=(-O 128) ;; esac
  next_port
  "${cmd[@]}" -p "$port" >"$tmp/srv" 2>&1 &
  srv_pid=$!
  for ((i = 0; i < 200; i++)); do
    if listening "$port" || ! kill -0 "$srv_pid" 2>/dev/null; then
      break
    fi
    sleep 0.05
  done
  "${cmd[@]}" -p "$port" 127.0.0.1 >"$tmp/cli" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || kill "$srv_pid" 2>/dev/null || true
  wait "$srv_pid" || src=$?
  srv_pid=
  if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ]; then
    note "rep $rep: ucx_perftest $test $size B $tr failed (client $rc, server $src):" \
      "$(grep -v '^softrdma: stats' "$tmp/cli" | awk 'NF { l = $0 } END { print substr(l, 1, 160) }')"
    return 1
  fi
  if ! on_path "$tr" "$tmp/cli"; then
    note "rep $rep: ucx_perftest $test $size B $tr: no packets on that path (SOFTRDMA_STATS); left out"
    return 1
  fi
  row=$(awk '/^[0-9]+,/ { r = $0 } END { print r }' "$tmp/cli")
  [ -n "$row" ] || { note "rep $rep: ucx_perftest $test $size B $tr: no result row"; return 1; }
}

# ucx_point POINT TEST SIZE ITERS: the point on every transport.
ucx_point() {
  local point=$1 test=$2 size=$3 iters=$4 tr
  for tr in "${order[@]}"; do
    case $tr in sr-*) [ "$sr_ok" = 1 ] || continue ;; esac
    ucx_once "$tr" "$test" "$size" "$iters" || continue
    case $test in
    *_bw) record "$point" "$tr" "$(awk -F, '{ printf "%.3f", $6 * 1048576 * 8 / 1e9 }' <<<"$row")" ;;
    *) record "$point" "$tr" "$(cut -d, -f2 <<<"$row")" ;;
    esac
  done
}

# mpi_points: bench/mpi_compat.c at 2 ranks on every transport.
mpi_points() {
  local tr rc line
  local -a a
  for tr in "${order[@]}"; do
    case $tr in sr-*) [ "$sr_ok" = 1 ] || continue ;; esac
    read -r -a a <<<"${mpi_args[$tr]}"
    rc=0
    timeout 180 "${clean_env[@]}" mpirun --allow-run-as-root --oversubscribe -np 2 "${a[@]}" \
      "$tmp/mpi_compat" -n 5000 -m 100 >"$tmp/mpi" 2>&1 </dev/null || rc=$?
    line=$(grep -m1 '^mpi_compat: ranks' "$tmp/mpi" || true)
    if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
      note "rep $rep: mpi_compat $tr failed (exit $rc):" \
        "$(grep -v '^softrdma: stats' "$tmp/mpi" | awk 'NF { l = $0 } END { print substr(l, 1, 160) }')"
      continue
    fi
    # both ranks must have received on the path (two stats lines)
    if [ "${tr#sr-}" != "$tr" ]; then
      local field=shm_rx_pkts
      [ "$tr" = sr-udp ] && field=udp_rx_pkts
      if [ "$(grep -cE "$field=[1-9]" "$tmp/mpi")" -lt 2 ]; then
        note "rep $rep: mpi_compat $tr: not both ranks received on that path (SOFTRDMA_STATS); left out"
        continue
      fi
    fi
    read -r -a a <<<"$line"
    record mpi_pingpong_8 "$tr" "${a[4]}"
    record mpi_allreduce_8 "$tr" "${a[6]}"
    record mpi_allreduce_1m "$tr" "$(awk -v g="${a[10]}" 'BEGIN { printf "%.4f", g * 8 }')"
  done
}

# ---- the run ------------------------------------------------------------------

busy=100
for ((i = 0; i < quiet_wait / 2 + 1; i++)); do
  busy=$(cpu_busy_pct 2)
  if [ "$busy" -lt "$quiet_pct" ]; then
    break
  fi
  if [ "$i" -eq 0 ] && [ "$quiet_wait" -gt 0 ]; then
    log "machine ${busy}% busy; waiting up to ${quiet_wait}s for < ${quiet_pct}%"
  fi
done
if [ "$busy" -ge "$quiet_pct" ]; then
  note "started with the machine ${busy}% busy (other processes)"
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
done_reps=0

for ((rep = 1; rep <= reps; rep++)); do
  if [ $(($(date +%s) - t_start)) -ge "$deadline" ]; then
    note "BENCH_DEADLINE ($deadline s) reached: $done_reps of $reps repetitions run"
    break
  fi
  echo "busy - $rep $(cpu_busy_pct 1)" >>"$raw"
  # rotate the transports' order by one each repetition
  k=$(((rep - 1) % ${#transports[@]}))
  order=("${transports[@]:k}" "${transports[@]:0:k}")
  log "rep $rep/$reps: ucx_perftest latency (order ${order[*]})"
  ucx_point tag_lat_8 tag_lat 8 20000
  ucx_point put_lat_8 ucp_put_lat 8 20000
  ucx_point get_lat_8 ucp_get 8 20000
  ucx_point get_lat_64k ucp_get 65536 2000
  log "rep $rep/$reps: ucx_perftest bandwidth"
  ucx_point tag_bw_64k tag_bw 65536 20000
  ucx_point tag_bw_1m tag_bw 1048576 2000
  ucx_point put_bw_64k ucp_put_bw 65536 20000
  ucx_point put_bw_1m ucp_put_bw 1048576 2000
  log "rep $rep/$reps: Open MPI, 2 ranks"
  mpi_points
  done_reps=$rep
done
t_end=$(date +%s)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the report ---------------------------------------------------------------

# table TITLE PEER_A PEER_B then "point|label|unit" lines on stdin: one row
# per point, "median (min..max)" per transport, then the ratios of medians
# sr-udp/tcp and sr-shm/sm.
table() {
  awk -v title="$1" -v na="$2" -v nb="$3" -v rawf="$raw" '
    function f(x) {
      if (x < 1) return sprintf("%.3f", x)
      if (x < 10) return sprintf("%.2f", x)
      if (x < 100) return sprintf("%.1f", x)
      return sprintf("%.0f", x)
    }
    function med(k,   m, i, j, t, v) {
      m = cnt[k]; if (!m) return -1
      for (i = 1; i <= m; i++) v[i] = val[k, i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      lo[k] = v[1]; hi[k] = v[m]
      return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    function cell(k,   m) {
      m = med(k)
      return m < 0 ? "n/a" : f(m) " (" f(lo[k]) ".." f(hi[k]) ")"
    }
    function ratio(a, b,   x, y) {
      x = med(a); y = med(b)
      return x < 0 || y <= 0 ? "n/a" : sprintf("%.2f", x / y)
    }
    BEGIN {
      while ((getline l < rawf) > 0) {
        split(l, w, " ")
        k = w[1] SUBSEP w[2]; cnt[k]++; val[k, cnt[k]] = w[4]
      }
      print title
      printf "%-18s %-4s  %-22s %-22s %-22s %-22s %9s %9s\n", "point", "unit", "softrdma shm",
        "softrdma UDP", na, nb, "UDP/tcp", "shm/" (nb ~ /vader/ ? "vader" : "sm")
    }
    {
      split($0, p, "|")
      printf "%-18s %-4s  %-22s %-22s %-22s %-22s %9s %9s\n", p[2], p[3],
        cell(p[1] SUBSEP "sr-shm"), cell(p[1] SUBSEP "sr-udp"), cell(p[1] SUBSEP "tcp"),
        cell(p[1] SUBSEP "sm"), ratio(p[1] SUBSEP "sr-udp", p[1] SUBSEP "tcp"),
        ratio(p[1] SUBSEP "sr-shm", p[1] SUBSEP "sm")
    }'
}

busy_med=$(awk '$1 == "busy" { print $4 }' "$raw" | sort -n |
  awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : "n/a" }')
report=$tmp/report
{
  echo "softrdma compatibility figures  $stamp  (bench/compat.sh, REPS=$reps; $done_reps repetitions run)"
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), kernel $(uname -r)"
  echo "source:  commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    "($(git -C "$root" --no-optional-locks status --porcelain 2>/dev/null | wc -l) paths modified), build $build"
  echo "tools:   ucx $(dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null), open mpi" \
    "$(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null)"
  echo "load:    load average $load_start at the start, $load_end at the end; $((t_end - t_start)) s;" \
    "machine busy before each rep (median of 1 s samples) ${busy_med}%"
  echo "cells:   median (min..max) over the repetitions; ratios: softrdma median / peer median"
  echo "         (us: below 1 softrdma is faster; Gb/s: above 1)"
  echo
  table "ucx_perftest, 2 processes (latency: p50 us; bandwidth: overall Gb/s, -O 128)" \
    "UCX tcp" "UCX sm" <<'EOF'
tag_lat_8|tag_lat 8 B|us
put_lat_8|ucp_put_lat 8 B|us
get_lat_8|ucp_get 8 B|us
get_lat_64k|ucp_get 64 KiB|us
tag_bw_64k|tag_bw 64 KiB|Gb/s
tag_bw_1m|tag_bw 1 MiB|Gb/s
put_bw_64k|ucp_put_bw 64 KiB|Gb/s
put_bw_1m|ucp_put_bw 1 MiB|Gb/s
EOF
  echo
  table "Open MPI, 2 ranks (softrdma: pml ucx; peers: pml ob1; medians of per-call times)" \
    "ob1 tcp" "ob1 vader" <<'EOF'
mpi_pingpong_8|ping-pong 8 B|us
mpi_allreduce_8|Allreduce 8 B|us
mpi_allreduce_1m|Allreduce 1 MiB|Gb/s
EOF
  if [ -s "$notes" ]; then
    echo
    echo "notes"
    sed 's/^/  /' "$notes"
  fi
} >"$report"

mkdir -p "$(dirname "$out")"
{
  cat "$report"
  echo
  echo "raw values (point transport rep value)"
  cat "$raw"
} >"$out"
cat "$report"
echo
echo "written to $out"
