# ports.sh: sourced by the compat scripts. sr_claim_port prints a port that
# no other test holds: below the kernel's and softrdma's ephemeral ranges
# (32768 and up), without a TCP listener or a softrdma-cm listener entry,
# and locked for the calling script (a directory holding its pid, taken
# with mkdir, which is atomic; a dead holder's lock is taken over).
# sr_release_port PORT drops the lock (call it from the EXIT trap).
sr_claim_port() {
    _start=$(( ($$ * 37 + $(date +%N | sed 's/^0*//;s/^$/0/') ) % 12000 ))
    _i=0
    while [ $_i -lt 2000 ]; do
        _p=$(( 20000 + (_start + _i * 7) % 12000 ))
        _i=$((_i + 1))
        _d=/tmp/softrdma-test-port-$_p
        if ! mkdir "$_d" 2>/dev/null; then
            _h=$(cat "$_d/pid" 2>/dev/null)
            [ -n "$_h" ] && kill -0 "$_h" 2>/dev/null && continue
            rm -rf "$_d"
            mkdir "$_d" 2>/dev/null || continue
        fi
        echo $$ >"$_d/pid"
        if ls /dev/shm/softrdma-cm-*-"$_p"-* >/dev/null 2>&1 ||
            ss -Hltn "sport = :$_p" 2>/dev/null | grep -q .; then
            rm -rf "$_d"
            continue
        fi
        echo "$_p"
        return 0
    done
    return 1
}

sr_release_port() {
    [ -n "${1:-}" ] && rm -rf "/tmp/softrdma-test-port-$1"
}

# sr_wait_cm PS PORT: until a softrdma librdmacm listener publishes port
# space PS (hex, as in docs/CM.md) and PORT, at most 10 s.
sr_wait_cm() {
    _i=0
    while [ $_i -lt 100 ]; do
        ls /dev/shm/softrdma-cm-*-"$1"-"$2"-* >/dev/null 2>&1 && return 0
        sleep 0.1
        _i=$((_i + 1))
    done
    return 1
}

# sr_wait_tcp PORT: until a TCP listener is up on PORT, at most 10 s.
sr_wait_tcp() {
    _i=0
    while [ $_i -lt 100 ]; do
        ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
        sleep 0.1
        _i=$((_i + 1))
    done
    return 1
}
