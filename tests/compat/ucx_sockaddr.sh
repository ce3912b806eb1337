#!/usr/bin/env bash
# ucx_sockaddr.sh LIBDIR: UCX 1.13's client-server connection through a
# socket address over its rdmacm connection manager, on softrdma's
# librdmacm. libucx-dev's ucp_client_server example is compiled here; the
# server (listener on the wildcard address) and the client (connecting to
# 127.0.0.1) run with UCX_SOCKADDR_TLS_PRIORITY=rdmacm, so no other CM can
# stand in, and UCX_TLS=rc_verbs: with ud_verbs as well the UCP address
# (58 bytes) exceeds the 54 bytes of private data UCX's rdmacm CM can carry
# (56 in an RDMA_PS_TCP REQ, IBA 12.6.5 minus the A11 header, less its own
# 2-byte header) and UCX gives up on the endpoint (docs/CM.md).
# Checks: the client exits 0, the server reports every iteration's message
# received and prints exactly what the client sent, and the CM trace shows
# the REQ, REP and RTU on QP1. Exit 77 when UCX cannot see srdma0 or the
# example is missing.
set -u
libdir=$1
ex=/usr/share/doc/libucx-dev/examples
[ -f $ex/ucp_client_server.c ] || { echo "SKIP: no $ex/ucp_client_server.c (libucx-dev)"; exit 77; }
# shellcheck source=ucx_env.sh
. "$(dirname "$0")/ucx_env.sh"
# shellcheck source=ports.sh
. "$(dirname "$0")/ports.sh"
tmp=$(mktemp -d) spid='' port=''
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"; sr_release_port "$port"' EXIT
cp $ex/*.c $ex/*.h "$tmp/"
cc -O1 -o "$tmp/ucp_cs" "$tmp/ucp_client_server.c" -lucp -lucs 2>"$tmp/cc" ||
    { echo "SKIP: the example does not build:"; cat "$tmp/cc"; exit 77; }
port=$(sr_claim_port) || { echo "FAIL: no free port"; exit 1; }
export UCX_NET_DEVICES=srdma0:1 UCX_TLS=rc_verbs UCX_SOCKADDR_TLS_PRIORITY=rdmacm
export SOFTRDMA_CM_TRACE=1
iters=4
# the server serves clients one after another until it is stopped
SOFTRDMA_CM_TRACE=1 stdbuf -oL timeout 60 "$tmp/ucp_cs" -p "$port" -c tag -i $iters -s 100 -v 2 \
    >"$tmp/s" 2>"$tmp/s.err" &
spid=$!
sr_wait_cm 106 "$port" || echo "note: no rdma_cm listener entry after 10 s"
timeout 60 "$tmp/ucp_cs" -a 127.0.0.1 -p "$port" -c tag -i $iters -s 100 -v 2 \
    >"$tmp/c" 2>"$tmp/c.err"
crc=$?
for _ in $(seq 50); do # the server's last iteration printed (bounded: 5 s)
    grep -q "^Server: iteration #$iters\$" "$tmp/s" && break
    sleep 0.1
done
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
echo "--- server"; grep -v ClassPortInfo "$tmp/s.err" | tail -n 8; tail -n 12 "$tmp/s"
echo "--- client (exit $crc)"; grep -v ClassPortInfo "$tmp/c.err" | tail -n 8; tail -n 6 "$tmp/c"
[ "$crc" -eq 0 ] || { echo "FAIL: client exit $crc"; exit 1; }
# the example prints the first and the last iteration: on the server,
# each with "UCP TEST SUCCESS" and its 2 buffers of 99 characters and a '.'
! grep -q 'unable to receive' "$tmp/s.err" || { echo "FAIL: a receive failed"; exit 1; }
for i in 1 $iters; do
    grep -q "^Server: iteration #$i\$" "$tmp/s" || { echo "FAIL: no server iteration #$i"; exit 1; }
done
n=$(grep -c 'UCP TEST SUCCESS' "$tmp/s")
[ "$n" -eq 2 ] || { echo "FAIL: the server reported $n successes, not 2"; exit 1; }
grep -E '^[A-Z]{99}\.$' "$tmp/c" >"$tmp/sent"
grep -E '^[A-Z]{99}\.$' "$tmp/s" >"$tmp/rcvd"
[ "$(wc -l <"$tmp/sent")" -eq 4 ] || { echo "FAIL: the client printed $(wc -l <"$tmp/sent") buffers"; exit 1; }
cmp -s "$tmp/sent" "$tmp/rcvd" || { echo "FAIL: the server's data differ from the client's"; diff "$tmp/sent" "$tmp/rcvd" | head; exit 1; }
for e in "s.err:recv REQ" "s.err:send REP" "s.err:recv RTU" "c.err:send REQ" "c.err:recv REP"; do
    grep -q "${e#*:}" "$tmp/${e%%:*}" || { echo "FAIL: no '${e#*:}' in the ${e%%.*}'s CM trace"; exit 1; }
done
echo PASS
