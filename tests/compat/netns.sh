# shellcheck shell=sh
# netns.sh: sourced by the compat scripts that run a pair across network
# namespaces. sr_netns_up makes namespaces $na and $nb joined by a veth
# pair ($va 10.233.0.1/24 in A, $vb 10.233.0.2/24 in B), or exits 77 when
# it cannot (not root, no veth); an EXIT trap deletes them and $tmp
# whatever way the script ends (the caller's kills go in $sr_netns_kill).
# Names carry the script's pid, so concurrent tests never share them.
na=srA$$ nb=srB$$ va=sra$$ vb=srb$$
tmp=$(mktemp -d)
sr_netns_kill=
sr_netns_down() {
    for p in $sr_netns_kill; do
        kill "$p" 2>/dev/null && wait "$p"
    done
    ip netns del "$na" 2>/dev/null
    ip netns del "$nb" 2>/dev/null
    rm -rf "$tmp"
}

sr_netns_up() {
    [ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
    trap sr_netns_down EXIT
    trap 'exit 1' HUP INT TERM
    for c in "netns add $na" "netns add $nb" \
        "link add name $va netns $na type veth peer name $vb netns $nb" \
        "-n $na addr add 10.233.0.1/24 dev $va" "-n $nb addr add 10.233.0.2/24 dev $vb" \
        "-n $na link set lo up" "-n $nb link set lo up" \
        "-n $na link set $va up" "-n $nb link set $vb up"; do
        # shellcheck disable=SC2086
        ip $c 2>"$tmp/ip" || { echo "SKIP: ip $c: $(cat "$tmp/ip")"; exit 77; }
    done
}

# sr_netns_wait_cm NS PS PORT: until a softrdma listener in namespace NS
# publishes port space PS (hex) and PORT, at most 10 s.
sr_netns_wait_cm() {
    _ino=$(ip netns exec "$1" stat -L -c %i /proc/self/ns/net)
    _i=0
    while [ $_i -lt 100 ]; do
        ls /dev/shm/softrdma-cm-"$_ino"-"$2"-"$3"-* >/dev/null 2>&1 && return 0
        sleep 0.1
        _i=$((_i + 1))
    done
    return 1
}

# sr_netns_packets: packets B's veth end has received and sent
sr_netns_packets() {
    _d=/sys/class/net/$vb/statistics
    ip netns exec "$nb" sh -c "echo \$((\$(cat $_d/rx_packets) + \$(cat $_d/tx_packets)))"
}
