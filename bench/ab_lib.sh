# shellcheck shell=bash
# bench/ab_lib.sh: what the perftest-pair benchmarks share (sourced, not
# run): bench/loss.sh, place_ab.sh, read_loss_ab.sh, tail_ab.sh, cc_ab.sh
# and cc_window_ab.sh.
#
#   ab_listening PORT       a TCP listener is up on PORT
#   ab_next_port            advances $port to the next port with no TCP
#                           listener (below $port_end when that is set)
#   ab_seeds SPEC REP       ab_fs / ab_fc: SOFTRDMA_FAULT values for the
#                           server and the client of repetition REP (SPEC
#                           with seed 2 REP + 1 and 2 REP + 2), empty for
#                           an empty SPEC
#   ab_pair OUT LIMIT ENVS ENVC CMD...
#                           one server "CMD -p PORT" and one client
#                           "CMD -p PORT 127.0.0.1" on the next free port,
#                           each under "env ENV..." (ENVS, ENVC: words) and
#                           timeout LIMIT; outputs in OUT.srv and OUT.cli,
#                           exit codes in ab_crc and ab_src; returns 1 when
#                           either failed. A client that fails takes its
#                           server down with it. The server's pid is in
#                           ab_srv while it runs (ab_cleanup kills it).
#   ab_udp_pair OUT LIMIT LIBDIR SPEC CMD...
#                           ab_pair over softrdma's UDP path (SOFTRDMA_SHM=0)
#                           with the libraries of LIBDIR, SOFTRDMA_STATS=1
#                           and the faults of SPEC seeded by ab_seeds for
#                           repetition $rep (none for an empty SPEC)
#   ab_quick ARGS...        quick=1 for "--quick", 0 for none; a usage
#                           error (exit 2) for anything else
#   ab_stat FILE KEY        KEY= of the softrdma stats line in FILE
#   ab_summary FMT          "median [min..max]" of the numbers on stdin,
#                           each printed with FMT, or n/a
#   ab_cleanup              for the caller's EXIT trap: the server, $tmp
ab_srv=
ab_crc=0
ab_src=0

ab_listening() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null || true)" ]; }

ab_next_port() {
  local _
  for _ in $(seq 100); do
    port=$((port + 1))
    if [ -n "${port_end:-}" ] && [ "$port" -ge "$port_end" ]; then
      echo "out of TCP ports" >&2
      exit 1
    fi
    ab_listening "$port" || return 0
  done
  echo "no free TCP port" >&2
  exit 1
}

ab_seeds() {
  ab_fs='' ab_fc=''
  [ -n "$1" ] || return 0
  ab_fs="$1,seed=$(($2 * 2 + 1))" ab_fc="$1,seed=$(($2 * 2 + 2))"
}

ab_pair() {
  local out=$1 limit=$2 i
  local -a envs envc
  read -r -a envs <<<"$3"
  read -r -a envc <<<"$4"
  shift 4
  ab_crc=0 ab_src=0
  ab_next_port
  timeout "$limit" env "${envs[@]}" "$@" -p "$port" >"$out.srv" 2>&1 &
  ab_srv=$!
  for ((i = 0; i < 200; i++)); do
    if ab_listening "$port" || ! kill -0 "$ab_srv" 2>/dev/null; then break; fi
    sleep 0.05
  done
  timeout "$limit" env "${envc[@]}" "$@" -p "$port" 127.0.0.1 >"$out.cli" 2>&1 || ab_crc=$?
  [ "$ab_crc" -eq 0 ] || kill "$ab_srv" 2>/dev/null || true
  wait "$ab_srv" || ab_src=$?
  ab_srv=
  [ "$ab_crc" -eq 0 ] && [ "$ab_src" -eq 0 ]
}

ab_udp_pair() {
  local out=$1 limit=$2 env="LD_LIBRARY_PATH=$3 SOFTRDMA_SHM=0 SOFTRDMA_STATS=1"
  ab_seeds "$4" "$rep"
  shift 4
  ab_pair "$out" "$limit" "$env SOFTRDMA_FAULT=$ab_fs" "$env SOFTRDMA_FAULT=$ab_fc" "$@"
}

ab_quick() {
  quick=0
  local a
  for a in "$@"; do
    case $a in
    --quick) quick=1 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
    esac
  done
}

ab_stat() { sed -n "s/.*softrdma: stats.* $2=\([0-9]*\).*/\1/p" "$1" | head -n1; }

ab_summary() {
  sort -g | awk -v f="$1" '
    { a[NR] = $1 }
    END {
      if (NR == 0) { print "n/a"; exit }
      m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      printf f " [" f ".." f "]\n", m, a[1], a[NR] }'
}

ab_cleanup() {
  [ -z "$ab_srv" ] || kill "$ab_srv" 2>/dev/null || true
  [ -z "${tmp:-}" ] || rm -rf "$tmp"
}
