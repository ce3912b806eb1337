#!/usr/bin/env bash
# Two hosts: Debian's unmodified ibv_rc_pingpong between two network
# namespaces joined by a veth pair, softrdma bound to each namespace's
# address with SOFTRDMA_ADDR (RoCEv2 over a real Ethernet device, not lo).
#   netns_pingpong.sh LIBDIR
# Creates namespaces srA<pid>/srB<pid> with veth ends 10.231.0.1/24 and
# 10.231.0.2/24 (plus fd00:231::1/64 and ::2/64, nodad). The addresses exist
# only inside the namespaces this script creates, and the namespaces are
# removed on exit (trap), on failure too.
# Cases, each server in A, client in B, -g 0 -c -n 100:
#   ipv4      default size (4096)     GIDs ::ffff:10.231.0.x
#   ipv4_64K  -s 65536                GIDs ::ffff:10.231.0.x
#   ipv6      default size            GIDs fd00:231::x
#   ipv6_64K  -s 65536                GIDs fd00:231::x
# For the IPv6 cases the out-of-band TCP exchange still goes to 10.231.0.1:
# ibv_rc_pingpong's server listens on the first passive getaddrinfo()
# result, 0.0.0.0 (IPv4 only), so a client connecting to fd00:231::1 gets
# "Couldn't connect". The GIDs the pair exchanges over that TCP connection
# are the IPv6 ones, so RDMA traffic is IPv6 (checked below).
# Both veth ends have UDP segmentation offload off (ethtool -K ...
# tx-udp-segmentation off), so the kernel cuts softrdma's GSO trains into
# datagrams before the link, as a NIC without USO would: the link carries
# (and tshark, on B's end, captures) the packets a wire would.
# Checks per case: both sides exit 0 and print "iters in"; each side's local
# and remote GIDs are the expected addresses; the veth ends carried at least
# the data packets each way (100 x ceil(size/1024) at the default path MTU
# 1024); every captured packet's ICRC is right for the IP header it carries
# (pcap_icrc.py, zlib), and over IPv4 some carry the non-zero
# identifications (< 64) of GSO segments. Exit 77 (SKIP) when namespaces
# cannot be created.
set -u
. "$(dirname "$0")/lib.sh"
libdir=$1
port=18701
pp_timeout=40

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: not root, cannot create network namespaces"; exit $SKIP
fi
for t in ip ss ibv_rc_pingpong timeout ethtool tshark python3; do
  command -v $t >/dev/null || { echo "SKIP: $t not found"; exit $SKIP; }
done

# Namespaces left by an earlier run that was killed (SIGKILL skips the trap):
# named after the pid of their script, stale once that pid is gone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^sr[AB][0-9]+$'); do
  kill -0 "${ns:3}" 2>/dev/null || { echo "removing stale namespace $ns"; ip netns del "$ns"; }
done

tag=$$
nsa=srA$tag nsb=srB$tag
va=srva$tag vb=srvb$tag
out=$(mktemp -d)
srv=
cleanup() {
  if [ -n "$srv" ]; then kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; fi
  sr_netns_del "$nsa" "$nsb"
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if ! ip netns add "$nsa" 2>"$out/err" || ! ip netns add "$nsb" 2>>"$out/err"; then
  echo "SKIP: cannot create network namespaces: $(cat "$out/err")"; exit $SKIP
fi
sr_netns_track "$nsa" "$nsb"
# a kernel without veth (or a restricted container) is the environment's
# limit, not softrdma's: skip too
if ! { ip link add name "$va" netns "$nsa" type veth peer name "$vb" netns "$nsb" &&
       ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
       ip -n "$nsa" addr add 10.231.0.1/24 dev "$va" &&
       ip -n "$nsb" addr add 10.231.0.2/24 dev "$vb" &&
       ip -n "$nsa" addr add fd00:231::1/64 dev "$va" nodad &&
       ip -n "$nsb" addr add fd00:231::2/64 dev "$vb" nodad &&
       ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up; } 2>"$out/err"; then
  echo "SKIP: cannot set up the veth pair between the namespaces: $(cat "$out/err")"
  exit $SKIP
fi
echo "namespaces $nsa ($va 10.231.0.1, fd00:231::1) <-> $nsb ($vb 10.231.0.2, fd00:231::2)"
if ! { ip netns exec "$nsa" ethtool -K "$va" tx-udp-segmentation off &&
       ip netns exec "$nsb" ethtool -K "$vb" tx-udp-segmentation off; } 2>"$out/err"; then
  echo "FAIL: cannot turn UDP segmentation offload off on the veth: $(cat "$out/err")"; exit 1
fi
here=$(cd "$(dirname "$0")" && pwd)

# the veth must be up (carrier) before traffic; at most 5 s
for _ in $(seq 50); do
  ip -n "$nsa" -o link show "$va" | grep -q LOWER_UP &&
    ip -n "$nsb" -o link show "$vb" | grep -q LOWER_UP && break
  sleep 0.1
done

ifstat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
# UDP datagrams sent in namespace $1 over IPv4 ($2=4) or IPv6 ($2=6)
udpout() {
  if [ "$2" = 4 ]; then
    ip netns exec "$1" awk '/^Udp:/ { if (++n == 1) { for (i = 1; i <= NF; i++) h[i] = $i }
                             else for (i = 1; i <= NF; i++) if (h[i] == "OutDatagrams") print $i }' /proc/net/snmp
  else
    ip netns exec "$1" awk '$1 == "Udp6OutDatagrams" { print $2 }' /proc/net/snmp6
  fi
}

fails=0
# run_case NAME FAMILY(4|6) ADDR_A ADDR_B GID_A GID_B SIZE
run_case() {
  local name=$1 fam=$2 addr_a=$3 addr_b=$4 gid_a=$5 gid_b=$6 size=$7 ok=1
  local other=$(( fam == 4 ? 6 : 4 ))
  local re_a=${gid_a//./\\.} re_b=${gid_b//./\\.}
  local args=(-g 0 -c -n 100 -s "$size")
  local txa0 txb0 txa1 txb1 ua0 ub0 ua1 ub1 oa0 ob0 oa1 ob1 src crc
  txa0=$(ifstat "$nsa" "$va" tx_packets) txb0=$(ifstat "$nsb" "$vb" tx_packets)
  ua0=$(udpout "$nsa" $fam) ub0=$(udpout "$nsb" $fam)
  oa0=$(udpout "$nsa" $other) ob0=$(udpout "$nsb" $other)
  # capture on B's end of the link (classic pcap for pcap_icrc.py)
  rm -f "$out/cap.pcap"
  ip netns exec "$nsb" tshark -n -i "$vb" -f "udp port 4791" -B 64 -F pcap -w "$out/cap.pcap" \
    -a duration:$((pp_timeout + 20)) >"$out/tshark" 2>&1 &
  cap=$!
  for _ in $(seq 100); do
    grep -q "Capturing on" "$out/tshark" && [ -s "$out/cap.pcap" ] && break
    sleep 0.1
  done
  ip netns exec "$nsa" env LD_LIBRARY_PATH="$libdir" SOFTRDMA_ADDR="$addr_a" \
    timeout $pp_timeout ibv_rc_pingpong -p $port "${args[@]}" >"$out/srv" 2>&1 &
  srv=$!
  sr_wait_listen "$port" ip netns exec "$nsa"
  ip netns exec "$nsb" env LD_LIBRARY_PATH="$libdir" SOFTRDMA_ADDR="$addr_b" \
    timeout $pp_timeout ibv_rc_pingpong -p $port "${args[@]}" 10.231.0.1 >"$out/cli" 2>&1
  crc=$?
  wait $srv
  src=$?
  srv=
  txa1=$(ifstat "$nsa" "$va" tx_packets) txb1=$(ifstat "$nsb" "$vb" tx_packets)
  sleep 0.5
  kill -INT $cap 2>/dev/null
  wait $cap
  ua1=$(udpout "$nsa" $fam) ub1=$(udpout "$nsb" $fam)
  oa1=$(udpout "$nsa" $other) ob1=$(udpout "$nsb" $other)
  echo "=== $name: server in $nsa SOFTRDMA_ADDR=$addr_a, client in $nsb SOFTRDMA_ADDR=$addr_b, ${args[*]}"
  echo "--- server ($src)"; cat "$out/srv"
  echo "--- client ($crc)"; cat "$out/cli"
  check() { if ! eval "$2"; then echo "FAIL [$name]: $1"; ok=0; else echo "ok   [$name]: $1"; fi; }
  check "both sides exit 0 (server=$src client=$crc)" '[ $src -eq 0 ] && [ $crc -eq 0 ]'
  check "both sides print a result line" 'grep -q "iters in" "$out/srv" && grep -q "iters in" "$out/cli"'
  check "server local GID $gid_a" 'grep -Eq "local address: .* GID $re_a\$" "$out/srv"'
  check "server remote GID $gid_b" 'grep -Eq "remote address: .* GID $re_b\$" "$out/srv"'
  check "client local GID $gid_b" 'grep -Eq "local address: .* GID $re_b\$" "$out/cli"'
  check "client remote GID $gid_a" 'grep -Eq "remote address: .* GID $re_a\$" "$out/cli"'
  local want=$(( 100 * ( (size + 1023) / 1024 ) ))
  check "$va sent $((txa1 - txa0)) packets, $vb sent $((txb1 - txb0)) (each >= $want data packets)" \
    '[ $((txa1 - txa0)) -ge $want ] && [ $((txb1 - txb0)) -ge $want ]'
  check "UDP over IPv$fam: $nsa sent $((ua1 - ua0)) datagrams, $nsb $((ub1 - ub0)); none over IPv$other" \
    '[ $((ua1 - ua0)) -gt 0 ] && [ $((ub1 - ub0)) -gt 0 ] && [ $((oa1 - oa0)) -eq 0 ] && [ $((ob1 - ob0)) -eq 0 ]'
  local gso_ids=()
  [ $fam = 4 ] && gso_ids=(--want-gso-ids)
  python3 "$here/pcap_icrc.py" "$out/cap.pcap" $((2 * want)) "${gso_ids[@]}" >"$out/icrc" 2>&1
  local icrc_rc=$?
  cat "$out/icrc"
  check "captured packets carry the right ICRC for their headers${gso_ids:+ (GSO segments)}" \
    '[ $icrc_rc -eq 0 ]'
  [ $ok -eq 1 ] || fails=$((fails + 1))
}

run_case ipv4     4 10.231.0.1  10.231.0.2  ::ffff:10.231.0.1 ::ffff:10.231.0.2 4096
run_case ipv4_64K 4 10.231.0.1  10.231.0.2  ::ffff:10.231.0.1 ::ffff:10.231.0.2 65536
run_case ipv6     6 fd00:231::1 fd00:231::2 fd00:231::1       fd00:231::2       4096
run_case ipv6_64K 6 fd00:231::1 fd00:231::2 fd00:231::1       fd00:231::2       65536

if [ $fails -ne 0 ]; then echo "FAIL: $fails case(s) failed"; exit 1; fi
echo PASS
