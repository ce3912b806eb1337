#!/bin/sh
# bench/cmtime.sh [REPS [CONNS]]: rdma_cm connection setup and teardown
# costs, as rdmacm-utils' cmtime measures them, on softrdma's librdmacm
# (docs/CM.md, "Connection setup figures").
#
# cmtime's client (one process) takes CONNS ids through each step for all
# of them at once and prints, per step, the total wall time, the longest
# and shortest single call and the total divided by CONNS; its server (a
# second process, on the same host) accepts every request. Steps: create
# id, resolve addr, resolve route, create qp, connect (REQ, the server's
# CONNECT_REQUEST and rdma_accept, REP, RTU: the accept is inside it),
# disconnect (DREQ, DREP), destroy.
#
# Two paths, both on loopback: shm (the default between local processes)
# and udp (SOFTRDMA_SHM=0: RoCEv2 datagrams through the kernel's UDP).
# Each of the REPS repetitions (default 5) runs both, their order
# alternating, so drifts in machine load hit the two alike. The table gives
# per path and step the median over the repetitions and the min..max of
# the total ms and of us per connection. A benchmark, not a test: never in
# ctest. CONNS defaults to 100.
#
# Environment:
#   BENCH_BUILD   build directory whose lib/ holds librdmacm.so.1 (build)
#   CMTIME        the cmtime binary (cmtime on PATH)
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../tests/compat/ports.sh
. "$here/../tests/compat/ports.sh"
reps=${1:-5} conns=${2:-100}
build=${BENCH_BUILD:-$here/../build}
lib=$(cd "$build/lib" && pwd) || { echo "no $build/lib: build first" >&2; exit 1; }
cmtime=${CMTIME:-$(command -v cmtime)} || { echo "no cmtime (apt-get install rdmacm-utils)" >&2; exit 1; }
tmp=$(mktemp -d) spid='' port=''
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"; sr_release_port "$port"' EXIT

# one cmtime run on path $1 (shm|udp), its step lines appended to $tmp/all
one() {
    shm=1
    [ "$1" = udp ] && shm=0
    port=$(sr_claim_port) || { echo "no free port" >&2; return 1; }
    SOFTRDMA_SHM=$shm LD_LIBRARY_PATH=$lib timeout 120 "$cmtime" -p "$port" -c "$conns" \
        >"$tmp/s" 2>&1 &
    spid=$!
    sr_wait_cm 106 "$port" || echo "note: no listener entry after 10 s" >&2
    SOFTRDMA_SHM=$shm LD_LIBRARY_PATH=$lib timeout 120 "$cmtime" -s 127.0.0.1 -p "$port" \
        -c "$conns" >"$tmp/c" 2>&1
    rc=$?
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    spid=
    sr_release_port "$port"
    port=
    if [ $rc -ne 0 ] || ! grep -q '^disconnect *:' "$tmp/c"; then
        echo "$1 run failed (exit $rc):" >&2
        tail -n 5 "$tmp/c" >&2
        return 1
    fi
    # "resolve addr :   3.41   3.36   2805.00   68.28" -> path step total us/conn
    sed -n 's/^\([a-z][a-z ]*[a-z]\) *: *\([0-9.]*\) *[0-9.]* *[0-9.]* *\([0-9.]*\)$/\1:\2:\3/p' \
        "$tmp/c" | while IFS=: read -r step total per; do
        echo "$1:$step:$total:$per"
    done >>"$tmp/all"
}

: >"$tmp/all"
echo "cmtime -c $conns, $reps repetitions, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
r=1
while [ $r -le "$reps" ]; do
    if [ $((r % 2)) -eq 1 ]; then order="shm udp"; else order="udp shm"; fi
    for p in $order; do
        one "$p" || exit 1
    done
    r=$((r + 1))
done

# median and min..max of field $2 over the lines of stdin (numbers)
stats() {
    sort -g | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%9.2f %9.2f..%-9.2f", m, v[1], v[NR] }'
}
printf '%-4s %-14s %9s %20s %9s %20s\n' path step "total ms" "min..max" "us/conn" "min..max"
for p in shm udp; do
    for step in "create id" "resolve addr" "resolve route" "create qp" "connect" \
        "disconnect" "destroy"; do
        grep -q "^$p:$step:" "$tmp/all" || continue
        t=$(grep "^$p:$step:" "$tmp/all" | cut -d: -f3 | stats)
        u=$(grep "^$p:$step:" "$tmp/all" | cut -d: -f4 | stats)
        printf '%-4s %-14s %s %s\n' "$p" "$step" "$t" "$u"
    done
done
