#!/usr/bin/env python3
"""RoCEv2 CNPs between softrdma and an independent encoder.

This script is the peer of one softrdma RC QP (tests/cc/cnp_peer.c, DCQCN
on). It builds every packet it sends, and checks every packet it gets, with
its own code written from the specification (IBA Vol 1 9.2 BTH, Annex A17.3.3
ICRC, Annex A17.9.3 CNP), not with softrdma's codec:

 1. it sends a CNP to the QP: softrdma's reaction point must halve its rate
    (DCQCN, alpha 1);
 2. it sends an RC SEND ONLY marked CE in the IP header: softrdma's
    notification point must answer with a CNP to this script's QPN (BECN
    set, PSN 0, 16 reserved zero bytes, a valid ICRC) and the responder
    with an ACK, and the 16 bytes must arrive;
 3. the loopback traffic is captured (AF_PACKET) into a pcap, in which
    tshark must dissect softrdma's CNP as InfiniBand opcode 0x81, CNP.

   cnp_interop.py CNP_PEER_BINARY OUTDIR
Exits 0 on success, 1 on a failed check, 77 when it cannot run here (not
root, no tshark)."""
import ctypes
import os
import queue
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

SKIP = 77
ROCE_PORT = 4791
MY_QPN = 0x1234A


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# ---- the invariant CRC, IBA Annex A17.3.3 (IPv4) ----
def icrc(ip_hdr, udp_hdr, transport):
    """CRC-32 over 8 bytes of ones (the LRH RoCEv2 does not carry), the IPv4
    header with TOS, TTL and checksum set to ones, the UDP header with its
    checksum set to ones, and the transport packet (BTH with its byte 4,
    FECN/BECN/reserved, set to ones; the ICRC itself excluded)."""
    ip = bytearray(ip_hdr)
    ip[1] = 0xFF  # TOS (DSCP, ECN)
    ip[8] = 0xFF  # TTL
    ip[10:12] = b"\xff\xff"  # header checksum
    udp = bytearray(udp_hdr)
    udp[6:8] = b"\xff\xff"  # UDP checksum
    bth = bytearray(transport)
    bth[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth))
    return struct.pack("<I", crc)


def ipv4_header(src, dst, total_len, ident=0):
    """The header Linux puts on an unconnected UDP socket's datagram with
    IP_PMTUDISC_DO: DF set, identification 0 (the fields the ICRC keeps)."""
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, total_len, ident, 0x4000, 64, 17, 0,
                       socket.inet_aton(src), socket.inet_aton(dst))


def finish(src, dst, sport, transport):
    """transport (no ICRC) -> transport + ICRC for a datagram src:sport -> dst:4791."""
    ulen = 8 + len(transport) + 4
    ip = ipv4_header(src, dst, 20 + ulen)
    udp = struct.pack("!HHHH", sport, ROCE_PORT, ulen, 0)
    return transport + icrc(ip, udp, transport)


def bth(opcode, dest_qp, psn, ack_req=False, becn=False, pad=0):
    """IBA 9.2: opcode, SE/M/PadCnt/TVer, P_Key, FECN/BECN/resv, DestQP,
    A/resv, PSN."""
    b1 = (pad & 3) << 4
    b4 = 0x40 if becn else 0
    return struct.pack("!BBHB", opcode, b1, 0xFFFF, b4) + dest_qp.to_bytes(3, "big") + \
        struct.pack("!B", 0x80 if ack_req else 0) + psn.to_bytes(3, "big")


def check_icrc(src, dst, sport, pkt, ident=0):
    ulen = 8 + len(pkt)
    ip = ipv4_header(src, dst, 20 + ulen, ident)
    udp = struct.pack("!HHHH", sport, ROCE_PORT, ulen, 0)
    return icrc(ip, udp, pkt[:-4]) == pkt[-4:]


# ---- capture: everything to or from port 4791 on lo ----
def only_to(s, addrs):
    """A classic BPF filter on the packet socket s: IPv4 frames to one of
    addrs only. Loopback carries every other test's traffic too (perftest
    runs at Gb/s beside this one), which would fill the socket's queue
    faster than this thread drains it and push the one CNP out."""
    ins = [(0x28, 0, 0, 12),  # ldh [12]: EtherType (lo has an Ethernet header)
           (0x15, 0, len(addrs) + 1, 0x0800),  # not IPv4: drop
           (0x20, 0, 0, 30)]  # ld [30]: IPv4 destination
    for i, a in enumerate(addrs):  # equal: accept
        ins.append((0x15, len(addrs) - i, 0, int.from_bytes(socket.inet_aton(a), "big")))
    ins += [(0x06, 0, 0, 0), (0x06, 0, 0, 0x40000)]  # ret 0 (drop), ret 256 KiB (accept)
    prog = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *x) for x in ins))
    fprog = struct.pack("HL", len(ins), ctypes.addressof(prog))
    s.setsockopt(socket.SOL_SOCKET, 26, fprog)  # SO_ATTACH_FILTER (copied by the kernel)


class Capture(threading.Thread):
    def __init__(self, addrs):
        super().__init__(daemon=True)
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        only_to(self.s, addrs)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.s.bind(("lo", 0))
        self.frames = []
        self.stop = False

    def run(self):
        while not self.stop:
            r, _, _ = select.select([self.s], [], [], 0.05)
            if not r:
                continue
            data, addr = self.s.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue  # lo shows each frame twice: keep the delivered copy
            if len(data) >= 14 + 28 and data[12:14] == b"\x08\x00" and data[14 + 9] == 17:
                ihl = (data[14] & 15) * 4
                dport = struct.unpack("!H", data[14 + ihl + 2:14 + ihl + 4])[0]
                if dport == ROCE_PORT:
                    self.frames.append((time.time(), data))

    def write_pcap(self, path):
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
            for t, d in self.frames:
                f.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(d), len(d)))
                f.write(d)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    peer_bin, outdir = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        print("SKIP: not root (the capture needs AF_PACKET)")
        return SKIP
    tshark = shutil.which("tshark")
    if not tshark:
        print("SKIP: no tshark")
        return SKIP
    n = 1 + os.getpid() % 250
    sr_addr, my_addr = "127.77.%d.1" % n, "127.77.%d.2" % n
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF, ID 0
    s.bind((my_addr, ROCE_PORT))
    cap = Capture((sr_addr, my_addr))
    cap.start()
    peer = subprocess.Popen([peer_bin, sr_addr, my_addr, hex(MY_QPN)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    lines = []
    # cnp_peer's lines through a thread and a queue: select() on the pipe
    # beside readline() missed lines that the file object had already
    # buffered (the "qpn" line and the first counters line arrive together
    # when this script is slow to read: it then waited for a line it held).
    out = queue.Queue()

    def reader():
        for line in peer.stdout:
            out.put(line)
        out.put("")

    threading.Thread(target=reader, daemon=True).start()

    def next_line(end):
        try:
            return out.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            return None

    def expect(pred, what, secs=5.0):
        end = time.monotonic() + secs
        while True:
            line = next_line(end)
            if not line:
                break
            lines.append(line.strip())
            kv = dict(x.split("=") for x in line.split() if "=" in x)
            if pred(line, kv):
                return kv
        fail("softrdma never reported " + what + "; it said: " + " | ".join(lines))

    try:
        first = (next_line(time.monotonic() + 10) or "").split()
        if len(first) != 4 or first[0] != "qpn":
            fail("cnp_peer did not start: %r" % first)
        qpn, line_rate = int(first[1]), int(first[3])
        print("softrdma QP 0x%x, rate %d b/s" % (qpn, line_rate))

        # 1. a CNP written here: the reaction point cuts
        cnp = finish(my_addr, sr_addr, ROCE_PORT, bth(0x81, qpn, 0, becn=True) + bytes(16))
        s.sendto(cnp, (sr_addr, ROCE_PORT))
        kv = expect(lambda l, kv: kv.get("cnps_rcvd") == "1", "the CNP")
        rate = int(kv["rate"])
        print("after our CNP: rate %d b/s" % rate)
        if rate * 2 != line_rate:
            fail("rate %d after a CNP, expected %d (half the line)" % (rate, line_rate // 2))

        # 2. a CE-marked SEND ONLY: a CNP and an ACK come back
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x03)  # ECN CE (RFC 3168 5)
        payload = b"0123456789abcdef"
        send = finish(my_addr, sr_addr, ROCE_PORT, bth(0x04, qpn, 0, ack_req=True) + payload)
        s.sendto(send, (sr_addr, ROCE_PORT))
        got = {}
        end = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < end:
            r, _, _ = select.select([s], [], [], 0.1)
            if not r:
                continue
            pkt, (src, sport) = s.recvfrom(4096)
            if src != sr_addr:
                continue
            # softrdma's GSO trains number IPv4 identifications 0..63
            if not any(check_icrc(sr_addr, my_addr, sport, pkt, i) for i in range(64)):
                fail("bad ICRC on softrdma's opcode 0x%02x: %s" % (pkt[0], pkt.hex()))
            got.setdefault(pkt[0], pkt)
        if 0x81 not in got:
            fail("no CNP for the CE-marked SEND (got opcodes %s)" % [hex(o) for o in got])
        c = got[0x81]
        want = bth(0x81, MY_QPN, 0, becn=True) + bytes(16)
        if len(c) != 32 or c[:28] != want:
            fail("CNP %s, expected %s + ICRC" % (c.hex(), want.hex()))
        print("softrdma's CNP: %s (valid ICRC)" % c.hex())
        if 0x11 not in got:
            fail("no ACK for the SEND")
        kv = expect(lambda l, kv: kv.get("recv") == "16", "the SEND's 16 bytes")
        if kv.get("cnps_sent") != "1" or kv.get("rx_ce") != "1":
            fail("softrdma counted %s CE arrivals and %s CNPs sent, expected 1 and 1" %
                 (kv.get("rx_ce"), kv.get("cnps_sent")))
    finally:
        peer.stdin.close()
        peer.wait(timeout=10)
        time.sleep(0.2)
        cap.stop = True
        cap.join()

    # 3. tshark reads softrdma's CNP as RoCEv2: a BTH with opcode 0x81 to our
    # QP, P_Key 0xffff, byte 4 0x40 (BECN), PSN 0, then the 16 reserved zero
    # bytes and the ICRC. (Wireshark 4.0 has no name for opcode 0x81: it
    # prints "Unknown (129)" and shows the rest as vendor data.)
    pcap = os.path.join(outdir, "cnp.pcap")
    cap.write_pcap(pcap)
    out = subprocess.run([tshark, "-n", "-r", pcap, "-Y", "infiniband.bth.opcode == 0x81",
                          "-T", "fields", "-E", "separator=;", "-e", "ip.src",
                          "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.p_key",
                          "-e", "infiniband.reserved", "-e", "infiniband.bth.psn",
                          "-e", "infiniband.vendor", "-e", "ip.dsfield.ecn"],
                         capture_output=True, text=True, timeout=60)
    rows = [r.split(";") for r in out.stdout.splitlines() if r]
    print("tshark's CNPs (src, dest QP, P_Key, byte 4, PSN, rest, IP ECN): %s" % rows)
    ours = [r for r in rows if r[0] == sr_addr]
    if len(ours) != 1:
        fail("tshark found %d CNPs from softrdma in %s (stderr: %s)" %
             (len(ours), pcap, out.stderr))
    src, dqp, pkey, b4, psn, rest, ecn = ours[0]
    rest = rest.replace(",", "")
    if (int(dqp, 16) != MY_QPN or pkey != "65535" or b4 != "40" or psn != "0" or
            not rest.endswith("00" * 16 + c[-4:].hex())):
        fail("tshark read softrdma's CNP as %s" % ours[0])
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
