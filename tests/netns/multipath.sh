#!/usr/bin/env bash
# Multipath over real UDP: namespaces A and B joined by two veth pairs
# (two subnets), each with a multipath route to the other's address over
# both links and the L4 hash (net.ipv4.fib_multipath_hash_policy=1), so a
# flow's UDP source port picks its link. One RC QP moves a verified
# transfer (mp_xfer: WRITEs checked by the target, READs back checked by
# the initiator) and the links' tx_bytes counters in A show where its
# packets went:
#  - SOFTRDMA_PATHS=16, spray, SOFTRDMA_PATH_REORDER=1 (no peer agrees to
#    reordering before selective acknowledgement): each link carries at
#    least 20% of A's bytes, every byte correct;
#  - SOFTRDMA_PATHS=1 (the default): all of the QP on one link.
# The kernel's hash is seeded at random per boot and the extra sockets'
# ports are the kernel's choice: with 16 ports the chance that fewer than
# 4 hash onto one link is 2%, so a lopsided split is run once more with
# new ports before it counts as a failure.
#   multipath.sh MP_XFER LIBDIR
# Root only; exits 77 (skip) where namespaces or veth cannot be made.
set -u
xfer=$1 libdir=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
na=srmpA$$ nb=srmpB$$
tmp=$(mktemp -d)
down() {
    ip netns del "$na" 2>/dev/null
    ip netns del "$nb" 2>/dev/null
    rm -rf "$tmp"
}
trap down EXIT
trap 'exit 1' HUP INT TERM
A="ip -n $na" B="ip -n $nb"
for c in "netns add $na" "netns add $nb" \
    "link add name mpa0 netns $na type veth peer name mpb0 netns $nb" \
    "link add name mpa1 netns $na type veth peer name mpb1 netns $nb"; do
    # shellcheck disable=SC2086
    ip $c 2>"$tmp/ip" || { echo "SKIP: ip $c: $(cat "$tmp/ip")"; exit 77; }
done
set -e
$A link set lo up
$B link set lo up
$A addr add 10.241.0.1/32 dev lo
$B addr add 10.241.0.2/32 dev lo
for i in 0 1; do
    $A addr add 10.241.$((i + 1)).1/24 dev mpa$i
    $B addr add 10.241.$((i + 1)).2/24 dev mpb$i
    $A link set mpa$i up
    $B link set mpb$i up
done
for ns in "$na" "$nb"; do
    ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=1
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0
done
$A route add 10.241.0.2/32 src 10.241.0.1 nexthop via 10.241.1.2 dev mpa0 nexthop via 10.241.2.2 dev mpa1
$B route add 10.241.0.1/32 src 10.241.0.2 nexthop via 10.241.1.1 dev mpb0 nexthop via 10.241.2.1 dev mpb1
set +e

# bytes, not packets: a UDP GSO train crosses a veth as one packet
txb() { ip netns exec "$na" cat /sys/class/net/"$1"/statistics/tx_bytes; }

# run NAME: one verified transfer with the environment given; sets d0, d1
run() {
    local a0 a1
    a0=$(txb mpa0) a1=$(txb mpa1)
    if ! ip netns exec "$na" env LD_LIBRARY_PATH="$libdir" SOFTRDMA_SHM=0 SOFTRDMA_MTU=1024 \
        SOFTRDMA_STATS=1 "$@" timeout 150 "$xfer" "$nb" 10.241.0.1 10.241.0.2 16 256 \
        >"$tmp/out" 2>&1; then
        cat "$tmp/out"
        echo "FAIL: transfer ($*)"
        exit 1
    fi
    cat "$tmp/out"
    grep -q "all correct" "$tmp/out" && grep -q "target found 0 bad; read back 0 bad" "$tmp/out" ||
        { echo "FAIL: data ($*)"; exit 1; }
    d0=$(($(txb mpa0) - a0)) d1=$(($(txb mpa1) - a1))
    echo "link bytes from A: mpa0 $d0, mpa1 $d1 ($*)"
}

fails=0
ok=0
for try in 1 2; do
    run SOFTRDMA_PATHS=16 SOFTRDMA_PATH_POLICY=spray SOFTRDMA_PATH_REORDER=1
    tot=$((d0 + d1))
    if [ $tot -gt 16777216 ] && [ $((d0 * 5)) -ge $tot ] && [ $((d1 * 5)) -ge $tot ]; then
        ok=1
        break
    fi
    echo "lopsided split (try $try)"
done
[ $ok = 1 ] || { echo "FAIL: one QP's packets did not split over both links (>= 20% each)"; fails=$((fails + 1)); }

run SOFTRDMA_PATHS=1
tot=$((d0 + d1)) lo=$((d0 < d1 ? d0 : d1))
# a few ARP packets may use the other link
[ $tot -gt 16777216 ] && [ $((lo * 100)) -lt $tot ] ||
    { echo "FAIL: single path used both links"; fails=$((fails + 1)); }

[ $fails -eq 0 ] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo PASS
