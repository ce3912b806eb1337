# shellcheck shell=bash
# multipath_lib.sh: sourced by tests/netns/multipath.sh and
# bench/multipath.sh. mp_up makes namespaces $na and $nb (names carry the
# caller's pid) joined by two veth pairs, mpa0-mpb0 (10.241.1.0/24) and
# mpa1-mpb1 (10.241.2.0/24), with 10.241.0.1 (A) and 10.241.0.2 (B) on
# their loopbacks and a multipath route to each other's over both links,
# hashed on L4 (net.ipv4.fib_multipath_hash_policy=1); or exits 77 when it
# cannot (not root, no veth). An EXIT trap deletes them and $tmp.
na=srmpA$$ nb=srmpB$$
tmp=$(mktemp -d)
mp_down() {
    ip netns del "$na" 2>/dev/null
    ip netns del "$nb" 2>/dev/null
    rm -rf "$tmp"
}

mp_up() {
    [ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
    trap mp_down EXIT
    trap 'exit 1' HUP INT TERM
    for c in "netns add $na" "netns add $nb" \
        "link add name mpa0 netns $na type veth peer name mpb0 netns $nb" \
        "link add name mpa1 netns $na type veth peer name mpb1 netns $nb"; do
        # shellcheck disable=SC2086
        ip $c 2>"$tmp/ip" || { echo "SKIP: ip $c: $(cat "$tmp/ip")"; exit 77; }
    done
    local A="ip -n $na" B="ip -n $nb" i ns
    $A link set lo up && $B link set lo up &&
        $A addr add 10.241.0.1/32 dev lo && $B addr add 10.241.0.2/32 dev lo || return 1
    for i in 0 1; do
        $A addr add 10.241.$((i + 1)).1/24 dev mpa$i && $B addr add 10.241.$((i + 1)).2/24 dev mpb$i &&
            $A link set mpa$i up && $B link set mpb$i up || return 1
    done
    for ns in "$na" "$nb"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 &&
            ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 || return 1
    done
    $A route add 10.241.0.2/32 src 10.241.0.1 \
        nexthop via 10.241.1.2 dev mpa0 nexthop via 10.241.2.2 dev mpa1 &&
        $B route add 10.241.0.1/32 src 10.241.0.2 \
            nexthop via 10.241.1.1 dev mpb0 nexthop via 10.241.2.1 dev mpb1
}

# mp_txb LINK: bytes A has sent on LINK (bytes, not packets: a UDP GSO
# train crosses a veth as one packet)
mp_txb() { ip netns exec "$na" cat /sys/class/net/"$1"/statistics/tx_bytes; }

# mp_xfer_run MP_XFER LIBDIR OUT MIB [VAR=VALUE...]: one verified transfer
# from A to B with that environment, its output in OUT; sets mp_d0 and
# mp_d1 to the bytes A sent on each link meanwhile. Fails (1) when the
# transfer fails or a byte is wrong.
mp_xfer_run() {
    local xfer=$1 libdir=$2 out=$3 mib=$4 a0 a1
    shift 4
    a0=$(mp_txb mpa0) a1=$(mp_txb mpa1)
    ip netns exec "$na" env LD_LIBRARY_PATH="$libdir" SOFTRDMA_SHM=0 SOFTRDMA_MTU=1024 \
        SOFTRDMA_STATS=1 "$@" timeout 150 "$xfer" "$nb" 10.241.0.1 10.241.0.2 "$mib" 256 \
        >"$out" 2>&1 || return 1
    grep -q "all correct" "$out" && grep -q "target found 0 bad; read back 0 bad" "$out" || return 1
    mp_d0=$(($(mp_txb mpa0) - a0)) mp_d1=$(($(mp_txb mpa1) - a1))
}
