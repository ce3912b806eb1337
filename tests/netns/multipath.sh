#!/usr/bin/env bash
# Multipath over real UDP: namespaces A and B joined by two veth pairs
# (two subnets), each with a multipath route to the other's address over
# both links and the L4 hash (net.ipv4.fib_multipath_hash_policy=1), so a
# flow's UDP source port picks its link (multipath_lib.sh). One RC QP
# moves a verified 16 MiB transfer (mp_xfer: WRITEs checked by the target,
# READs back checked by the initiator) and the links' tx_bytes counters in
# A show where its packets went:
#  - SOFTRDMA_PATHS=16, spray: the peer's responses show it takes SACKs
#    (docs/WIRE.md), so the requests are sprayed: each link carries at
#    least 20% of A's bytes, every byte correct;
#  - the same with SOFTRDMA_SACK=0 on both sides (standard go-back-N
#    peers, which must not be sprayed to): all of the QP on one link;
#  - SOFTRDMA_PATHS=1 (the default): all of the QP on one link.
# The kernel's hash is seeded at random per boot and the extra sockets'
# ports are the kernel's choice: with 16 ports the chance that fewer than
# 4 hash onto one link is 2%, so a lopsided split is run once more with
# new ports before it counts as a failure.
#   multipath.sh MP_XFER LIBDIR
# Root only; exits 77 (skip) where namespaces or veth cannot be made.
set -u
xfer=$1 libdir=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/multipath_lib.sh"
mp_up || { echo "FAIL: topology"; exit 1; }

# run VAR=VALUE...: a transfer that must succeed with every byte right
run() {
    if ! mp_xfer_run "$xfer" "$libdir" "$tmp/out" 16 "$@"; then
        cat "$tmp/out"
        echo "FAIL: transfer or data ($*)"
        exit 1
    fi
    cat "$tmp/out"
    echo "link bytes from A: mpa0 $mp_d0, mpa1 $mp_d1 ($*)"
}

fails=0
ok=0
for try in 1 2; do    run SOFTRDMA_PATHS=16 SOFTRDMA_PATH_POLICY=spray
    tot=$((mp_d0 + mp_d1))
    if [ $tot -gt 16777216 ] && [ $((mp_d0 * 5)) -ge $tot ] && [ $((mp_d1 * 5)) -ge $tot ]; then
        ok=1
        break
    fi
    echo "lopsided split (try $try)"
done
[ $ok = 1 ] || { echo "FAIL: one QP's bytes did not split over both links (>= 20% each)"; fails=$((fails + 1)); }

# one_link VAR=VALUE...: the whole QP on one link (a few ARP packets may
# use the other)
one_link() {
    run "$@"
    tot=$((mp_d0 + mp_d1)) lo=$((mp_d0 < mp_d1 ? mp_d0 : mp_d1))
    [ $tot -gt 16777216 ] && [ $((lo * 100)) -lt $tot ] ||
        { echo "FAIL: both links used ($*)"; fails=$((fails + 1)); }
}
one_link SOFTRDMA_PATHS=16 SOFTRDMA_PATH_POLICY=spray SOFTRDMA_SACK=0
one_link SOFTRDMA_PATHS=1

[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
