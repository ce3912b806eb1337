#!/bin/sh
# rping.sh LIBDIR RPING COUNT: Debian's rping, server and client on
# softrdma's librdmacm (loopback), -v -V -C COUNT (-V: each side checks
# every ping's data); both must exit 0 and the client must print every
# ping, the server every ping but its last (rping's loop ends there).
# Standard error goes to its own file: its lines (the CM thread's
# DISCONNECT EVENT) would otherwise land inside the block-buffered pings.
set -u
lib=$1 rping=$2 count=$3
. "$(dirname "$0")/ports.sh"
tmp=$(mktemp -d) spid=
port=$(sr_claim_port) || { echo "FAIL: no free port"; exit 1; }
trap 'kill $spid 2>/dev/null; rm -rf "$tmp"; sr_release_port $port' EXIT
LD_LIBRARY_PATH=$lib timeout 60 "$rping" -s -v -V -a 0.0.0.0 -p $port -C "$count" >"$tmp/s" 2>"$tmp/s.err" &
spid=$!
sr_wait_cm 106 $port
LD_LIBRARY_PATH=$lib timeout 60 "$rping" -c -v -V -a 127.0.0.1 -p $port -C "$count" >"$tmp/c" 2>"$tmp/c.err"
crc=$?
wait $spid
src=$?
cn=$(grep -c "^ping data: rdma-ping-" "$tmp/c")
sn=$(grep -c "^server ping data: rdma-ping-" "$tmp/s")
echo "client rc=$crc pings=$cn; server rc=$src pings=$sn"
if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ "$cn" -ne "$count" ] || [ "$sn" -lt $((count - 1)) ]; then
    tail -n 5 "$tmp/c" "$tmp/c.err" "$tmp/s" "$tmp/s.err"
    exit 1
fi
