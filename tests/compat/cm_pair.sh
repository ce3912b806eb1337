#!/bin/sh
# cm_pair.sh LIBDIR WAIT SERVER_ARGS... -- CLIENT_ARGS... [-- EXPECT...]
# An unmodified server and client on softrdma's libraries (loopback).
# @PORT@ in any argument becomes a port this test holds alone (ports.sh).
# WAIT: cm:PS (a librdmacm listener in port space PS, hex), tcp (a TCP
# listener on the port) or none (the server's fixed port is locked
# through ctest's RESOURCE_LOCK). Both sides exit 0 within SR_PAIR_SECONDS
# (60 s unless set), and each
# EXPECT, "c:REGEX" or "s:REGEX", matches the client's or the server's
# output ("!c:REGEX", "!s:REGEX": matches no line of it). A server that never exits by design (cmtime) is named with
# SR_SERVER_STAYS=1: it is stopped once the client is done.
set -u
. "$(dirname "$0")/ports.sh"
lib=$1 wait=$2
shift 2
tmp=$(mktemp -d) spid= port=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"; sr_release_port "$port"' EXIT
port=$(sr_claim_port) || { echo "FAIL: no free port"; exit 1; }
sub() { printf '%s\n' "$1" | sed "s/@PORT@/$port/g"; }
srv= cli= exp=
part=s
for a in "$@"; do
    if [ "$a" = -- ]; then
        [ $part = s ] && part=c || part=e
        continue
    fi
    a=$(sub "$a")
    case $part in
    s) srv="$srv $a" ;;
    c) cli="$cli $a" ;;
    e) printf '%s\n' "$a" >>"$tmp/expect" ;;
    esac
done
# shellcheck disable=SC2086
LD_LIBRARY_PATH=$lib timeout "${SR_PAIR_SECONDS:-60}" $srv >"$tmp/s" 2>&1 &
spid=$!
case $wait in
cm:*) sr_wait_cm "${wait#cm:}" "$port" || echo "note: no listener entry after 10 s" ;;
tcp) sr_wait_tcp "$port" || echo "note: no TCP listener after 10 s" ;;
none) sleep 1 ;;
esac
# shellcheck disable=SC2086
LD_LIBRARY_PATH=$lib timeout "${SR_PAIR_SECONDS:-60}" $cli >"$tmp/c" 2>&1
crc=$?
if [ "${SR_SERVER_STAYS:-0}" = 1 ]; then
    kill "$spid" 2>/dev/null
    wait "$spid"
    src=0
else
    wait "$spid"
    src=$?
fi
spid=
echo "--- server:$srv (exit $src)"; tail -n 30 "$tmp/s"
echo "--- client:$cli (exit $crc)"; tail -n 30 "$tmp/c"
[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || { echo "FAIL: exit codes server=$src client=$crc"; exit 1; }
if [ -f "$tmp/expect" ]; then
    while IFS= read -r e; do
        case $e in
        !*)
            e=${e#!}
            f=$tmp/${e%%:*}
            ! grep -E -- "${e#?:}" "$f" || { echo "FAIL: ${e%%:*} has /${e#?:}/"; exit 1; }
            ;;
        *)
            f=$tmp/${e%%:*}
            grep -qE -- "${e#?:}" "$f" || { echo "FAIL: ${e%%:*} lacks /${e#?:}/"; exit 1; }
            ;;
        esac
    done <"$tmp/expect"
fi
echo PASS
