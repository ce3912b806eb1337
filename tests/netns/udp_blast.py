"""Sends UDP datagrams with a chosen TOS for a bounded time and count, so the
switch's queue fills: the ECN test's traffic (softrdma itself sends no ECT).
   udp_blast.py DST PORT TOS SECONDS"""
import socket
import sys
import time

dst, port, tos, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3], 0), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
payload = bytes(1400)
end = time.monotonic() + secs
sent = 0
while sent < 2000000 and time.monotonic() < end:
    try:
        s.sendto(payload, (dst, port))
        sent += 1
    except OSError:  # ICMP unreachable from the far end, or a full device queue
        time.sleep(0.0001)
print(f"sent {sent}")
