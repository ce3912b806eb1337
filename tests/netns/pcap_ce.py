"""Checks a pcap of srdma-switch's egress: every IPv4 header checksum valid,
CE (ECN 3) on at least MIN packets and at most MARKS (the switch's mark
counter), never on packets to UDP port NOTECT_PORT (sent not-ECT).
   pcap_ce.py FILE MIN MARKS NOTECT_PORT"""
import struct
import sys


def csum_ok(hdr):
    s = sum(struct.unpack(f"!{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s == 0xFFFF


def main():
    path, want_min, marks, notect = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    data = open(path, "rb").read()
    if len(data) < 24:
        print("FAIL: empty pcap")
        return 1
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        print(f"FAIL: not a little-endian pcap ({magic:#x})")
        return 1
    off, ipv4, ce, bad, ce_notect = 24, 0, 0, 0, 0
    while off + 16 <= len(data):
        incl = struct.unpack("<4I", data[off : off + 16])[2]
        frame = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        if len(frame) < 34 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 15) * 4
        ipv4 += 1
        if not csum_ok(ip[:ihl]):
            bad += 1
        if ip[1] & 3 == 3:
            ce += 1
            if ip[9] == 17 and struct.unpack("!H", ip[ihl + 2 : ihl + 4])[0] == notect:
                ce_notect += 1
    print(f"pcap: {ipv4} IPv4 packets, {ce} CE, {bad} bad checksums, switch marks {marks}")
    ok = True
    if bad:
        print("FAIL: IPv4 header checksums wrong"); ok = False
    if ce < want_min:
        print(f"FAIL: fewer than {want_min} CE packets"); ok = False
    if ce > marks:
        print("FAIL: more CE packets than the switch marked"); ok = False
    if ce_notect:
        print(f"FAIL: {ce_notect} not-ECT packets carry CE"); ok = False
    return 0 if ok else 1


sys.exit(main())
