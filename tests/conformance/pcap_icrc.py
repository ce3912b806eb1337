#!/usr/bin/env python3
"""Check the ICRC of every RoCEv2 packet in a capture against the IP header
as captured (zlib's CRC-32, independent of src/wire).

usage: pcap_icrc.py PCAP MIN_PACKETS [--want-gso-ids]

Frames must be Ethernet (classic pcap, tshark -F pcap). Every UDP datagram to
port 4791 is a RoCEv2 packet whose last 4 bytes must be the ICRC of the
packet with the header it really carried. MIN_PACKETS: at least that many.
--want-gso-ids: at least one IPv4 packet must carry a non-zero
identification, every identification must be below 64, and no datagram may
exceed the link MTU: the capture then holds GSO trains cut by the kernel,
each segment with the identification its sender's ICRC was computed for.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_pingpong import icrc, read_pcap  # noqa: E402


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    path, want = sys.argv[1], int(sys.argv[2])
    gso = len(sys.argv) == 4 and sys.argv[3] == "--want-gso-ids"
    _, frames = read_pcap(path)
    n = bad = ids_nonzero = id_max = biggest = 0
    for _, f in frames:
        ethertype, = struct.unpack_from("!H", f, 12)
        ip = f[14:]
        if ethertype == 0x0800:
            l3, proto = (ip[0] & 0x0F) * 4, ip[9]
            total, = struct.unpack_from("!H", ip, 2)
            ip_id, = struct.unpack_from("!H", ip, 4)
        elif ethertype == 0x86DD:
            l3, proto, ip_id = 40, ip[6], None
            total = 40 + struct.unpack_from("!H", ip, 4)[0]
        else:
            continue
        if proto != 17 or struct.unpack_from("!H", ip, l3 + 2)[0] != 4791:
            continue
        ip = ip[:total]
        n += 1
        biggest = max(biggest, total)
        if ip_id is not None:
            ids_nonzero += ip_id != 0
            id_max = max(id_max, ip_id)
        got, = struct.unpack_from("<I", ip, len(ip) - 4)
        if got != icrc(ip):
            bad += 1
            if bad <= 5:
                print(f"FAIL: packet {n}: ICRC {got:#010x}, the header as captured gives "
                      f"{icrc(ip):#010x} (IPv4 identification {ip_id})")
    print(f"{n} RoCEv2 packets, {bad} with a wrong ICRC; IPv4 identifications: "
          f"{ids_nonzero} non-zero, largest {id_max}; largest IP packet {biggest} bytes")
    ok = bad == 0 and n >= want
    if n < want:
        print(f"FAIL: fewer than {want} packets")
    if gso and (ids_nonzero == 0 or id_max >= 64 or biggest > 1500):
        print("FAIL: not the segments of GSO trains (want non-zero identifications < 64, "
              "no packet above the 1500-byte MTU)")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
