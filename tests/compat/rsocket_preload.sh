#!/bin/sh
# rsocket_preload.sh LIBDIR PRELOAD MODE: unmodified TCP programs (socat as
# the server, netcat-openbsd as the client) on softrdma's rsockets through
# Debian's rsocket preload library (LD_PRELOAD=PRELOAD).
#   push:          nc sends a file, shuts down (-N); socat writes what it
#                  reads until end of file: the copy's checksum must match
#   pull:          socat sends a file and closes; nc reads to end of file
#   reader_killed: nc streams /dev/zero, the reading socat is killed: nc
#                  must end (write error), not hang
#   writer_killed: socat streams /dev/zero, it is killed: the reading nc
#                  must end (read error), not hang
# A connection that fell back to the kernel's TCP would show a TCP listener:
# the test fails then. Every process runs under a 60 s bound.
set -u
# shellcheck disable=SC2086 # $run is split on purpose
. "$(dirname "$0")/ports.sh"
lib=$1 pl=$2 mode=$3
tmp=$(mktemp -d) spid='' wpid='' port=''
trap '[ -n "$spid" ] && kill -9 $spid 2>/dev/null; [ -n "$wpid" ] && kill $wpid 2>/dev/null; rm -rf "$tmp"; sr_release_port "$port"' EXIT
port=$(sr_claim_port) || { echo "FAIL: no free port"; exit 1; }
fail() { echo "FAIL: $*"; echo "--- socat:"; tail -n 20 "$tmp/s.err"; echo "--- nc:"; tail -n 20 "$tmp/c.err"; exit 1; }
# env execs the program, so $! of "$run prog &" is the program's own pid
run="env LD_LIBRARY_PATH=$lib LD_PRELOAD=$pl"
listen="TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr"

head -c 24000000 /dev/urandom >"$tmp/in"
case $mode in
push) $run socat -u "$listen" "OPEN:$tmp/out,creat,trunc" 2>"$tmp/s.err" & ;;
pull) $run socat -U "$listen" "OPEN:$tmp/in" 2>"$tmp/s.err" & ;;
reader_killed) $run socat -u "$listen" OPEN:/dev/null 2>"$tmp/s.err" & ;;
writer_killed) $run socat -U "$listen" OPEN:/dev/zero 2>"$tmp/s.err" & ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
spid=$!
# socat's own bound (the exit trap stops it); it holds none of ctest's
# pipes, so ctest does not wait for its sleep
(
    sleep 60
    kill -9 $spid 2>/dev/null
) >/dev/null 2>&1 </dev/null &
wpid=$!
sr_wait_cm 106 "$port" || fail "no rsocket listener on port $port"
ss -Hltn "sport = :$port" | grep -q . && fail "a kernel TCP listener on $port: no rsocket"

start=$(date +%s)
case $mode in
push)
    $run timeout 60 nc.openbsd -N 127.0.0.1 "$port" <"$tmp/in" 2>"$tmp/c.err" || fail "nc exit $?"
    wait $spid || fail "socat exit $?"
    spid=
    cmp -s "$tmp/in" "$tmp/out" || fail "the copy differs: $(md5sum <"$tmp/in") vs $(md5sum <"$tmp/out")"
    ;;
pull)
    $run timeout 60 nc.openbsd -d 127.0.0.1 "$port" >"$tmp/out" 2>"$tmp/c.err" || fail "nc exit $?"
    wait $spid || fail "socat exit $?"
    spid=
    cmp -s "$tmp/in" "$tmp/out" || fail "the copy differs: $(md5sum <"$tmp/in") vs $(md5sum <"$tmp/out")"
    ;;
reader_killed | writer_killed)
    if [ "$mode" = reader_killed ]; then
        $run timeout 60 nc.openbsd -N 127.0.0.1 "$port" </dev/zero 2>"$tmp/c.err" &
    else
        $run timeout 60 nc.openbsd -d 127.0.0.1 "$port" >"$tmp/out" 2>"$tmp/c.err" &
    fi
    cpid=$!
    sleep 2
    kill -0 $cpid 2>/dev/null || fail "nc ended before the kill"
    kill -9 $spid
    wait $spid 2>/dev/null
    spid=
    killed=$(date +%s)
    wait $cpid
    crc=$?
    [ $crc -eq 124 ] && fail "nc still running 60 s on: a hang"
    echo "nc ended $(( $(date +%s) - killed )) s after the kill (exit $crc)"
    [ "$mode" = writer_killed ] && ! [ -s "$tmp/out" ] && fail "nc received nothing before the kill"
    ;;
esac
echo "PASS ($mode, $(( $(date +%s) - start )) s)"
