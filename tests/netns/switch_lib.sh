# switch_lib.sh: the topology the srdma-switch tests share (sourced, not
# run): namespaces h0..h(N-1), each with one veth end at 10.236.0.(i+1)/24,
# the other ends in a switch namespace where build/bin/srdma-switch opens
# them. Builds on tests/conformance/lib.sh (skip codes, namespace cleanup).
. "$(dirname "${BASH_SOURCE[0]}")/../conformance/lib.sh"

# sw_topology N: sets SW_NS (switch namespace), HOST_NS[i], SW_IF[i] and
# HOST_ADDR[i], HOST_ADDR2[i]. Offloads off on the host ends: a GSO train or a frame whose
# UDP checksum the kernel has yet to fill in would cross the switch as one
# unforwardable blob or be dropped by the receiver's stack. SW_MTU (default
# 1500) is every veth's MTU, both ends: 9000 makes jumbo links, on which
# softrdma picks a 4096-byte path MTU itself (src/verbs/device.c) and the
# switch forwards frames up to 9216 bytes.
sw_topology() {
  local n=$1 i mtu=${SW_MTU:-1500}
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: not root"; exit $SKIP; }
  command -v ethtool >/dev/null || { echo "SKIP: no ethtool"; exit $SKIP; }
  SW_NS=srsw$$
  ip netns add "$SW_NS" || { echo "SKIP: cannot create namespaces"; exit $SKIP; }
  sr_netns_track "$SW_NS"
  ip -n "$SW_NS" link set lo up
  for i in $(seq 0 $((n - 1))); do
    HOST_NS[$i]=srh$i.$$
    SW_IF[$i]=swp$i.$$
    HOST_ADDR[$i]=10.236.0.$((i + 1))
    ip netns add "${HOST_NS[$i]}" || { echo "SKIP: cannot create namespaces"; exit $SKIP; }
    sr_netns_track "${HOST_NS[$i]}"
    ip link add name eth0 netns "${HOST_NS[$i]}" type veth peer name "${SW_IF[$i]}" netns "$SW_NS" ||
      { echo "SKIP: no veth"; exit $SKIP; }
    # a second address: one device binds one address, so a host running two
    # servers gives the second its own
    HOST_ADDR2[$i]=10.236.0.$((i + 101))
    ip -n "${HOST_NS[$i]}" addr add "${HOST_ADDR[$i]}/24" dev eth0 &&
      ip -n "${HOST_NS[$i]}" addr add "${HOST_ADDR2[$i]}/24" dev eth0 &&
      ip -n "${HOST_NS[$i]}" link set eth0 mtu "$mtu" && ip -n "$SW_NS" link set "${SW_IF[$i]}" mtu "$mtu" &&
      ip -n "${HOST_NS[$i]}" link set lo up && ip -n "${HOST_NS[$i]}" link set eth0 up &&
      ip -n "$SW_NS" link set "${SW_IF[$i]}" up ||
      { echo "FAIL: cannot configure ${HOST_NS[$i]}"; exit 1; }
    ip netns exec "${HOST_NS[$i]}" ethtool -K eth0 tx off tso off gso off >/dev/null 2>&1
    ip netns exec "${HOST_NS[$i]}" ethtool -K eth0 tx-udp-segmentation off >/dev/null 2>&1
    ip netns exec "$SW_NS" ethtool -K "${SW_IF[$i]}" tx off gro off >/dev/null 2>&1
  done
}

# sw_test_begin N PROG...: a switch test's start. Skips (77) unless every
# PROG is installed; sets out (a temporary directory) and fails (0); the
# exit trap stops the switch and removes the topology and out; then the
# topology of N hosts (sw_topology).
sw_test_begin() {
  local n=$1 t
  shift
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "SKIP: $t not found"; exit $SKIP; }
  done
  out=$(mktemp -d)
  SW_PID=
  fails=0
  trap 'sw_stop; sw_del; rm -rf "$out"' EXIT
  sw_topology "$n"
}

# fail MESSAGE: one failed check, counted in fails
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# host I ADDR CMD...: CMD on HOST_NS[I] with softrdma's device on ADDR
# over UDP (SOFTRDMA_SHM=0), the library in $libdir, and the caller's
# SW_HOST_ENV (an array of VAR=value: its congestion control, stats)
host() {
  local i=$1 a=$2
  shift 2
  ip netns exec "${HOST_NS[$i]}" env SOFTRDMA_SHM=0 SOFTRDMA_ADDR="$a" \
    ${SW_HOST_ENV[@]+"${SW_HOST_ENV[@]}"} LD_LIBRARY_PATH="$libdir" "$@"
}

# sw_del: the cleanup trap's half for the topology
sw_del() {
  sr_netns_del "$SW_NS" "${HOST_NS[@]}"
}

# sw_start BIN OUT ARGS...: the switch on every port, its stdout in OUT;
# waits until it reports its ports up (at most 5 s). Sets SW_PID. The
# switch runs in a session of its own whose autogroup is at nice -20: it
# stands for hardware, and with scheduler autogroups a loaded machine's
# other sessions otherwise take its link time (its lost_ms counter; at
# load average 15 to 18 a 100 Mb/s egress lost 69 ms of 6 s and fell to
# 94-96 Mb/s). setsid does not fork here (a background job of a script is
# no process group leader), so SW_PID is the switch.
sw_start() {
  local bin=$1 o=$2 i ports=() _
  shift 2
  for i in "${!SW_IF[@]}"; do ports+=(--port "${SW_IF[$i]}"); done
  # shellcheck disable=SC2016
  ip netns exec "$SW_NS" setsid sh -c 'echo -20 >/proc/self/autogroup 2>/dev/null; exec "$0" "$@"' \
    "$bin" "${ports[@]}" --duration 120 "$@" >"$o" 2>"$o.err" &
  SW_PID=$!
  for _ in $(seq 50); do
    grep -q "ports up" "$o.err" && return 0
    kill -0 $SW_PID 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: the switch did not start"; cat "$o.err"; exit 1
}

# sw_stop: SIGINT, then its counters are in the OUT file
sw_stop() {
  [ -n "${SW_PID:-}" ] || return 0
  kill -INT $SW_PID 2>/dev/null
  wait $SW_PID
  SW_PID=
}

# sw_incast2 OUT PORT: the 2-to-1 incast through the switch: ib_write_bw
# servers on both of h2's addresses (PORT and PORT + 1), a client on h0
# and one on h1, 2 s of 64 KiB WRITEs each, every process started with
# host(); their output in OUT/cli1, cli2, srv1, srv2 and
# their exit statuses, clients first, in rcs.
# A run in which perftest's clock calibration failed is made again
# (sr_perftest_tries, tests/conformance/lib.sh).
sw_incast2() {
  sr_perftest_tries "$1"/cli1 "$1"/cli2 "$1"/srv1 "$1"/srv2 -- sw_incast2_once "$@"
}

sw_incast2_once() {
  local o=$1 p1=$2 p2=$(($2 + 1)) s1 s2 c1 c2 p
  host 2 "${HOST_ADDR[2]}" timeout 30 ib_write_bw -D 2 -s 65536 --report_gbits -p $p1 >"$o/srv1" 2>&1 &
  s1=$!
  host 2 "${HOST_ADDR2[2]}" timeout 30 ib_write_bw -D 2 -s 65536 --report_gbits -p $p2 >"$o/srv2" 2>&1 &
  s2=$!
  sr_wait_listen $p1 ip netns exec "${HOST_NS[2]}" && sr_wait_listen $p2 ip netns exec "${HOST_NS[2]}" ||
    { echo "FAIL: servers not listening"; cat "$o/srv1" "$o/srv2"; exit 1; }
  host 0 "${HOST_ADDR[0]}" timeout 30 ib_write_bw -D 2 -s 65536 --report_gbits -p $p1 "${HOST_ADDR[2]}" >"$o/cli1" 2>&1 &
  c1=$!
  host 1 "${HOST_ADDR[1]}" timeout 30 ib_write_bw -D 2 -s 65536 --report_gbits -p $p2 "${HOST_ADDR2[2]}" >"$o/cli2" 2>&1 &
  c2=$!
  rcs=
  for p in $c1 $c2 $s1 $s2; do
    wait $p
    rcs="$rcs $?"
  done
}

# sw_incast2_show OUT PATTERN: each process's lines that match PATTERN
# (grep -E), or its whole output if it exited non-zero
sw_incast2_show() {
  local st i=0 f
  read -ra st <<<"$rcs"
  for f in cli1 cli2 srv1 srv2; do
    echo "--- $f (exit ${st[$i]})"
    if [ "${st[$i]}" = 0 ]; then grep -E "$2" "$1/$f"; else cat "$1/$f"; fi
    i=$((i + 1))
  done
}

# sw_incast2_goodput OUT RATE_GBPS: the clients' "BW average" column of
# sw_incast2's run (Gb/s): both senders moved data and together no more
# than the bottleneck (5% for perftest's rounding); failures go through the
# caller's fail().
sw_incast2_goodput() {
  local g1 g2
  g1=$(awk '$1 == 65536 { print $4 }' "$1/cli1")
  g2=$(awk '$1 == 65536 { print $4 }' "$1/cli2")
  if [ -z "$g1" ] || [ -z "$g2" ]; then
    fail "no result line from a client"
    return
  fi
  echo "goodput: $g1 + $g2 Gb/s through a $2 Gb/s bottleneck"
  awk -v a="$g1" -v b="$g2" -v r="$2" 'BEGIN { exit !(a + b <= r * 1.05) }' ||
    fail "goodput $g1 + $g2 Gb/s above the $2 Gb/s bottleneck"
  awk -v a="$g1" -v b="$g2" 'BEGIN { exit !(a > 0 && b > 0) }' || fail "a sender moved nothing"
}

# sw_counter OUT PORT NAME: one counter of one port from the exit report
sw_counter() {
  sed -n "s/^port $2 .* $3=\([0-9]*\).*/\1/p" "$1"
}
