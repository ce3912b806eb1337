# shellcheck shell=bash
# bench/cc_switch_lib.sh: what bench/cc_switch.sh and bench/cc_converge.sh
# share (sourced): the switch wrapper, the base-RTT measurement and the
# DCQCN parameters derived from it.

# ccs_swrun DIR BIN: writes DIR/swrun, the switch at nice -20, in the
# session of its own that sw_start gives it (tests/netns/switch_lib.sh),
# whose autogroup is at nice -20 too. It stands for hardware: on a loaded
# 2-core host it loses link time to the hosts it connects and to other
# sessions (its clock catches up at most 20 ms, docs/SWITCH.md), so the
# bottleneck would run below its rate. With autogroups
# (sched_autogroup_enabled) a process's nice ranks it only within its
# session: at nice -20 in the benchmark's own session the switch lost
# 711 ms of a 4 s saturated 1 Gb/s run (lost_ms) at load average 18, in
# its own session at autogroup nice -20 none.
ccs_swrun() {
  printf '#!/bin/sh\nexec nice -n -20 %s "$@"\n' "$2" >"$1/swrun"
  chmod +x "$1/swrun"
}

# ccs_base_rtt_us OUT PORT LIB: the unloaded round trip from host 0 to the
# last host (index $rx) through the running switch: twice ib_write_lat's
# typical one-way latency of 2-byte WRITEs (softrdma over UDP), in us.
ccs_base_rtt_us() {
  local o=$1 p=$2 lib=$3 t
  ip netns exec "${HOST_NS[$rx]}" env SOFTRDMA_SHM=0 SOFTRDMA_ADDR="${HOST_ADDR[$rx]}" \
    LD_LIBRARY_PATH="$lib" timeout 30 ib_write_lat -F -n 1000 -s 2 -p "$p" >"$o/lat_srv" 2>&1 &
  local s=$!
  sr_wait_listen "$p" ip netns exec "${HOST_NS[$rx]}" || true
  ip netns exec "${HOST_NS[0]}" env SOFTRDMA_SHM=0 SOFTRDMA_ADDR="${HOST_ADDR[0]}" \
    LD_LIBRARY_PATH="$lib" timeout 30 ib_write_lat -F -n 1000 -s 2 -p "$p" "${HOST_ADDR[$rx]}" \
    >"$o/lat_cli" 2>&1 || true
  wait $s || true
  t=$(awk '$1 == 2 && NF >= 5 { print $5 }' "$o/lat_cli")
  # a failed or odd run ("inf", "-nan", nothing): 100 us
  awk -v t="${t:-0}" 'BEGIN { if (t !~ /^[0-9.]+$/) t = 50; v = int(2 * t + 0.5); print (v > 0 ? v : 100) }'
}

# ccs_window_rtt_us RATE_MBPS BUFFER_BYTES: the base RTT the window is
# sized from, so that 2 x rate x RTT = BUFFER / 8: eight QPs at line rate
# (and their 32 KiB first windows) fit the buffer before a CNP returns. The
# window is the buffer's protection, DCQCN's rate the control: a window
# from the measured round trip would either overflow the buffer (a loaded
# host's typical round trip is milliseconds, scheduling not path) or, from
# a quiet one, limit a QP whose round trip a software host stretches.
ccs_window_rtt_us() {
  awk -v l="$1" -v b="$2" 'BEGIN { print int(b / 8 * 8 / (2 * l)) }'
}

# ccs_dcqcn_params RTT_US WINDOW_RTT_US RATE_MBPS: DCQCN's parameters for
# this bottleneck. The published ones (DCQCN paper: N = 50 us, K = T =
# 55 us, R_AI = line / 1000) assume round trips of a few microseconds at
# 40-100 Gb/s; here the round trip is up to milliseconds, and a CNP every
# 50 us would cut a QP several times before its first cut could show in
# the queue. So: one CNP and at most one cut per round trip (N = decrease
# interval = the measured RTT, within [50 us, WINDOW_RTT_US]), the alpha
# and rate timers just longer (K = T = 1.1 N, as 55 us is to 50), R_AI a
# 200th of the line (the paper's 40 Mb/s at 40 Gb/s would take minutes to
# add up at 1 Gb/s with timers this long), R_HAI ten times that; the
# window on (bdp_mult=2) with its base RTT WINDOW_RTT_US, so that eight
# QPs' windows fill the buffer and no more (drop-free by construction);
# pace_line=1, the pacer standing in for a 1 Gb/s NIC port (a veth is as
# fast as the CPU, so an unpaced QP at line rate bursts its window into
# the queue at CPU speed); a pacer bucket of 64 KiB (a loaded host's NIC
# thread wakes hundreds of microseconds late; 16 packets of 4 KiB).
#
# CCS_DCQCN_WSCALE=S (default 1) multiplies the window's base RTT by S and
# turns on wnd_ss, the window opening by the bytes acknowledged up to that
# cap: a window-limited QP moves W / RTT, and the hosts' round trip here is
# milliseconds (each QP's 128 KiB covers 1 ms at 1 Gb/s), so S > 1 trades
# the no-drop construction for goodput (docs/CONGESTION.md, "Measured").
ccs_dcqcn_params() {
  awk -v r="$1" -v w="$2" -v l="$3" -v s="${CCS_DCQCN_WSCALE:-1}" 'BEGIN {
    n = r < 50 ? 50 : r; if (n > w && w >= 50) n = w; k = int(n * 1.1 + 0.5)
    ai = int(l / 200); if (ai < 1) ai = 1
    printf "bdp_mult=2,base_rtt_us=%d,cnp_interval_us=%d,decrease_interval_us=%d,alpha_timer_us=%d,rate_timer_us=%d,rai_mbps=%d,rhai_mbps=%d,pace_line=1,pace_burst=65536%s\n",
      int(w * s + 0.5), n, n, k, k, ai, 10 * ai, (s > 1 ? ",wnd_ss=1" : "") }'
}

# ccs_dcqcn_explain RTT_US WINDOW_RTT_US RATE_MBPS BUFFER: the derivation,
# printed with the table
ccs_dcqcn_explain() {
  awk -v r="$1" -v w="$2" -v l="$3" -v b="$4" -v s="${CCS_DCQCN_WSCALE:-1}" 'BEGIN {
    n = r < 50 ? 50 : r; if (n > w && w >= 50) n = w
    printf "# dcqcn: measured base RTT %d us (2 x ib_write_lat typical through the switch)\n", r
    if (s > 1)
      printf "#   window 2 x %d Mb/s x %d us = %.0f KiB per QP = buffer %s / 8 x %s (CCS_DCQCN_WSCALE), opened by ACKs (wnd_ss)\n", l, w * s, 2 * l * w * s / 8 / 1024, b, s
    else
      printf "#   window 2 x %d Mb/s x %d us = %.0f KiB per QP = buffer %s / 8 (8 QPs fit)\n", l, w, 2 * l * w / 8 / 1024, b
    printf "#   N = decrease interval = %d us (the RTT, in [50, %d]); K = T = 1.1 N; R_AI = line/200\n", n, w
    printf "#   pace_line=1 (a veth is faster than the bottleneck), pace_burst 64 KiB\n" }'
}

# ccs_nscc_params RTT_US WINDOW_RTT_US RATE_MBPS LINK_MTU: nscc's, for the
# same bottleneck. nscc cuts only on an ECN echo that comes with delay at
# or above its target (NSCC's quadrants, docs/CONGESTION.md), so:
#   - the base RTT learnt (base_rtt_us=0: the smallest sample, the
#     responder's reported hold taken off): a base too large reads a
#     marked queue as below target and never cuts (a loaded host's
#     ib_write_lat came out at 8.2 ms once), the smallest sample can
#     only err towards cutting;
#   - the target 1.5 x WINDOW_RTT_US, three quarters of the delay of
#     Kmin (buffer/8) at the line rate: every mark comes with more than
#     the target, so marks always cut, and the proportional increase runs
#     while the queue is below three quarters of Kmin (with half, 8
#     senders kept too little queued to cover the hosts' idle gaps: 0.87
#     of the link through a 4 MiB buffer, against 0.91 with this);
#   - md_max 0.125: the hosts' delay (milliseconds, not the queue) makes
#     every marked round trip's Swift factor its cap, and a deeper cut
#     per marked round trip leaves the link idle while the fair increase
#     (a packet per window) wins it back (0.25 gave 0.88 at 8 senders);
#   - the packet size the path MTU the links give; windows of buffer/8
#     to start (8 QPs' first round trips fit the buffer, so no slow
#     start: slow_start=0) and at most buffer/2; the pacer as dcqcn's
#     (pace_line=1, pace_burst 64 KiB).
ccs_nscc_params() {
  awk -v r="$1" -v w="$2" -v l="$3" -v m="$4" 'BEGIN {
    mtu = m >= 4200 ? 4096 : (m >= 2200 ? 2048 : 1024)
    b = 2 * l * w / 8   # bytes: buffer / 8
    printf "base_rtt_us=0,target_us=%d,mtu=%d,init_wnd=%d,max_wnd=%d,md_max=0.125,slow_start=0,pace_line=1,pace_burst=65536\n",
      w * 3 / 2, mtu, b, 4 * b }'
}

# ccs_nscc_explain RTT_US WINDOW_RTT_US LINK_MTU: the derivation, printed
# with the table
ccs_nscc_explain() {
  printf '# nscc: base RTT learnt (smallest sample less the hold; ib_write_lat gave %s us), target 1.5 x %s us (Kmin = buffer/8 is 4/3 of that at the line rate: every mark cuts), md_max 0.125, MTU from link %s, init_wnd buffer/8 (8 first windows fit: slow_start=0), max_wnd buffer/2, the pacer as dcqcn'"'"'s\n' "$1" "$2" "$3"
}
