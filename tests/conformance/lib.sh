# lib.sh: shell functions the conformance scripts share (sourced, not run).
# Every wait is bounded; failures print why and exit 1, an environment that
# cannot do what a test needs exits 77 (ctest SKIP_RETURN_CODE).

SKIP=77

# sr_wait_listen PORT [PREFIX...]: until a TCP listener is up on PORT (the
# perftest/pingpong server's out-of-band socket), at most 10 s. PREFIX runs
# the look elsewhere (ip netns exec NS). Looks, does not connect: the
# servers take the first connection as their peer.
sr_wait_listen() {
  local port=$1 _
  shift
  for _ in $(seq 100); do
    "$@" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    sleep 0.1
  done
  return 1
}

# perftest 4.5 calibrates its clock when it reports: a regression of
# gettimeofday against the TSC over 200 samples. Below r^2 = 0.9 (a
# preemption between one sample's two clock reads, which a loaded 2-core
# machine sees) it prints "Correlation coefficient ...", then exits 1
# with "Can't produce a report", or with -F reports inf. Such a run says
# nothing about softrdma, so the scripts make it again, at most
# SR_PERFTEST_TRIES times in all.
SR_PERFTEST_TRIES=3
# sr_perftest_clock_failed FILE...: one of perftest's outputs shows that
sr_perftest_clock_failed() {
  grep -qE "Correlation coefficient|Can't produce a report|^ *[0-9]+ +[0-9]+ +(inf|-?nan) " "$@" 2>/dev/null
}

# sr_perftest_tries FILE... -- CMD...: runs CMD (perftest processes whose
# outputs are the FILEs) again while their clock calibration failed, at
# most SR_PERFTEST_TRIES times in all
sr_perftest_tries() {
  local files=() try
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    files+=("$1")
    shift
  done
  shift
  for try in $(seq $SR_PERFTEST_TRIES); do
    "$@"
    sr_perftest_clock_failed "${files[@]}" || return 0
    echo "note: perftest's clock calibration failed (try $try):" \
      "$(grep -hE "Correlation coefficient|Can't produce a report" "${files[@]}" | tr '\n' ' ')"
  done
}

# sr_report SRC CRC: prints $out/srv and $out/cli with their exit codes and
# fails unless both are 0.
sr_report() {
  echo "--- server ($1)"; cat "$out/srv"
  echo "--- client ($2)"; cat "$out/cli"
  [ "$1" -eq 0 ] && [ "$2" -eq 0 ] || { echo "FAIL: exit codes server=$1 client=$2"; exit 1; }
}

# sr_check_faults: with SR_EXPECT_FAULTS set (and SOFTRDMA_STATS=1), both
# sides' stats lines show the injected faults SR_EXPECT_FAULTS names above 0,
# repaired by the transport (the run itself passed).
sr_check_faults() {
  [ -n "${SR_EXPECT_FAULTS:-}" ] || return 0
  local side line k
  for side in srv cli; do
    line=$(grep "softrdma: stats" "$out/$side") || { echo "FAIL: no stats from $side"; exit 1; }
    for k in $SR_EXPECT_FAULTS; do
      echo "$line" | grep -qE "$k=[1-9]" || { echo "FAIL: $side: $k not above 0"; exit 1; }
    done
  done
}

# sr_netns_pair NSA NSB IFA IFB ADDRA ADDRB: two network namespaces joined by
# a veth pair, IFA (ADDRA/24) in NSA and IFB (ADDRB/24) in NSB, loopback and
# the link up. Exits 77 where namespaces or veth cannot be made (not root, a
# restricted container). The caller deletes the namespaces (sr_netns_del).
sr_netns_pair() {
  local nsa=$1 nsb=$2 ifa=$3 ifb=$4 addra=$5 addrb=$6
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: not root"; exit $SKIP; }
  ip netns add "$nsa" && ip netns add "$nsb" || { echo "SKIP: cannot create namespaces"; exit $SKIP; }
  sr_netns_track "$nsa" "$nsb"
  ip link add name "$ifa" netns "$nsa" type veth peer name "$ifb" netns "$nsb" ||
    { echo "SKIP: no veth"; exit $SKIP; }
  ip -n "$nsa" addr add "$addra/24" dev "$ifa" && ip -n "$nsb" addr add "$addrb/24" dev "$ifb" &&
    ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
    ip -n "$nsa" link set "$ifa" up && ip -n "$nsb" link set "$ifb" up ||
    { echo "FAIL: cannot configure the veth pair"; exit 1; }
}

# sr_netns_track NS...: remembers named namespaces for sr_netns_del. Each
# namespace's inode names its devices' shared-memory mailboxes; a
# descriptor held on it keeps the number from being reused before then.
sr_netns_track() {
  local ns fd
  for ns in "$@"; do
    exec {fd}<"/run/netns/$ns" || continue
    SR_NETNS_FDS="${SR_NETNS_FDS:-} $fd"
    SR_NETNS_INODES="${SR_NETNS_INODES:-} $(stat -L -c %i "/proc/self/fd/$fd")"
  done
}

# sr_netns_del NS...: removes the namespaces that exist (cleanup traps),
# and the shared-memory mailboxes that devices left behind in any
# namespace sr_netns_track remembered (a killed process's: no later device
# in that namespace will sweep them). Call it once the processes are gone.
sr_netns_del() {
  local ns ino fd
  for ino in ${SR_NETNS_INODES:-}; do
    rm -f /dev/shm/softrdma-"$ino"-*
  done
  for ns in "$@"; do
    [ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
  done
  for fd in ${SR_NETNS_FDS:-}; do
    exec {fd}<&-
  done
  SR_NETNS_INODES= SR_NETNS_FDS=
  return 0
}
