#!/bin/sh
# rdmacm_fail.sh LIBDIR RPING CASE: Debian's rping on softrdma's librdmacm
# (loopback, UDP) when the peer is not there or goes away. Each case has a
# bound from docs/CM.md ("Failures") and fails when rping outlives it.
#   reject    client to a port nobody listens on: REJECTED, error 8 (invalid
#             service ID, as the kernel's CM answers), at once (< 5 s)
#   stopped   server stopped (SIGSTOP) before the client's REQ and killed
#             after it: UNREACHABLE, error -110 within (retries + 1) x
#             (2 x 2^16 + 2^T) x 4.096 us; with SOFTRDMA_CM_TIMEOUT=14 and
#             SOFTRDMA_CM_RETRIES=3 that is 4 x 0.6 s = 2.4 s (< 6 s)
#   server    connected, pinging, server SIGKILLed: the client's rping sees
#             DISCONNECTED (liveness probes, SOFTRDMA_CM_KEEPALIVE_MS=300:
#             within 4 x 0.3 s) and exits (< 6 s)
#   client    the same, client killed: the server's rping ends
set -u
lib=$1 rping=$2 case=$3
tmp=$(mktemp -d)
pids=
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
export LD_LIBRARY_PATH=$lib SOFTRDMA_SHM=0
port=$((20000 + $$ % 20000))

now() { date +%s%N; }
# wait_pid PID LIMIT_S: the pid's exit code, or 124 once it outlived LIMIT_S
wait_pid() {
    (sleep "$2"; kill -9 "$1" 2>/dev/null) >/dev/null 2>&1 &
    g=$!
    wait "$1"
    r=$?
    kill "$g" 2>/dev/null || return 124
    wait "$g" 2>/dev/null
    return $r
}
wait_listen() {
    i=0
    while [ $i -lt 50 ] && ! ls /dev/shm/softrdma-cm-*-106-$port-* >/dev/null 2>&1; do
        sleep 0.1
        i=$((i + 1))
    done
}
start_server() {
    "$rping" -s -a 0.0.0.0 -p $port -C 100000000 >"$tmp/s" 2>"$tmp/s.err" &
    spid=$!
    pids="$pids $spid"
    wait_listen
}
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/*; do echo "--- $f"; tail -n 5 "$f"; done
    exit 1
}

case $case in
reject)
    t0=$(now)
    "$rping" -c -a 127.0.0.1 -p $port -C 1 >"$tmp/c" 2>"$tmp/c.err" &
    cpid=$!
    wait_pid $cpid 5
    rc=$?
    ms=$((($(now) - t0) / 1000000))
    echo "client rc=$rc after $ms ms: $(cat "$tmp/c.err" | tr '\n' ' ')"
    [ $rc -ne 124 ] || fail "rping still waiting after 5 s"
    grep -q "RDMA_CM_EVENT_REJECTED, error 8" "$tmp/c.err" || fail "no REJECTED, error 8"
    ;;
stopped)
    start_server
    kill -STOP $spid
    t0=$(now)
    SOFTRDMA_CM_TIMEOUT=14 SOFTRDMA_CM_RETRIES=3 "$rping" -c -a 127.0.0.1 -p $port -C 1 \
        >"$tmp/c" 2>"$tmp/c.err" &
    cpid=$!
    # the REQ is out once the client's device is up (its UDP socket) and
    # a little after: on a loaded machine starting rping can take longer
    # than that alone, and a client that resolves after the kill finds no
    # listener, waits 2 s and is REJECTED instead (docs/CM.md)
    i=0
    while [ $i -lt 100 ] && ! ss -Hanup 2>/dev/null | grep -q "pid=$cpid,"; do
        sleep 0.05
        i=$((i + 1))
    done
    sleep 0.3 # now the server dies without a word
    kill -9 $spid
    wait_pid $cpid 6
    rc=$?
    ms=$((($(now) - t0) / 1000000))
    echo "client rc=$rc after $ms ms: $(cat "$tmp/c.err" | tr '\n' ' ')"
    [ $rc -ne 124 ] || fail "rping still waiting after 6 s"
    grep -q "RDMA_CM_EVENT_UNREACHABLE, error -110" "$tmp/c.err" || fail "no UNREACHABLE, error -110"
    [ $ms -ge 2000 ] || fail "UNREACHABLE after $ms ms, before the 4 x 0.6 s of retries"
    ;;
server | client)
    export SOFTRDMA_CM_KEEPALIVE_MS=300
    start_server
    "$rping" -c -a 127.0.0.1 -p $port -C 100000000 >"$tmp/c" 2>"$tmp/c.err" &
    cpid=$!
    pids="$pids $cpid"
    sleep 1.5
    if [ "$case" = server ]; then victim=$spid survivor=$cpid side=c; else victim=$cpid survivor=$spid side=s; fi
    kill -0 $victim 2>/dev/null || fail "the $case was gone before it was killed"
    kill -9 $victim
    t0=$(now)
    wait_pid $survivor 6
    rc=$?
    ms=$((($(now) - t0) / 1000000))
    echo "survivor rc=$rc after $ms ms: $(cat "$tmp/$side.err" | tr '\n' ' ')"
    [ $rc -ne 124 ] || fail "the survivor's rping did not end within 6 s"
    # it learns from the CM (DISCONNECTED) or, when a transfer was under
    # way, from its RC QP first (retry counter exceeded, status 12)
    grep -qE "DISCONNECT EVENT|completion failed status 12" "$tmp/$side.err" ||
        fail "the survivor saw neither DISCONNECTED nor a failed completion"
    ;;
*)
    echo "unknown case $case"
    exit 2
    ;;
esac
echo PASS
