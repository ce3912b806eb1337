#!/usr/bin/env python3
"""Conformance: tshark must dissect srdma-wire's sample capture as RoCEv2.

usage: tshark_sample.py SRDMA_WIRE {ipv4|ipv6} WORKDIR

srdma-wire writes a pcap with one packet per supported opcode and prints,
per packet, the header fields it encoded. This test asserts that for every
packet:
  - tshark dissects it as InfiniBand (UDP 4791) with the same opcode,
    destination QP, PSN and every extension-header field;
  - tshark reports nothing malformed and the IP and UDP checksums verify;
  - the ICRC is right, recomputed here with zlib.crc32 per IBTA Annex A17
    (an implementation independent of src/wire), and equals tshark's
    "Invariant CRC" field.
"""
import struct
import subprocess
import sys
import zlib

# tshark names the AtomicETH address and key after the RETH ones.
FIELD_ALIAS = {"atomiceth.va": "reth.va", "atomiceth.r_key": "reth.r_key"}
# Fields tshark prints as raw bytes (hex digits, no prefix).
BYTES_FIELDS = {"immdt", "ieth"}
IB_FIELDS = [
    "bth.opcode", "bth.se", "bth.m", "bth.padcnt", "bth.tver", "bth.p_key", "bth.destqp",
    "bth.a", "bth.psn", "reth.va", "reth.r_key", "reth.dmalen", "aeth.syndrome", "aeth.msn",
    "atomiceth.swapdt", "atomiceth.cmpdt", "atomicacketh.origremdt", "immdt", "ieth",
    "deth.q_key", "deth.srcqp", "invariant.crc",
]
OTHER_FIELDS = ["frame.protocols", "_ws.malformed", "_ws.expert.severity", "ip.checksum.status",
                "udp.checksum.status", "udp.dstport"]

failures = []


# Opcodes Wireshark 4.0 (Debian 12) does not dissect: the CNP, and IBTA
# 1.5's ATOMIC WRITE; nor softrdma's SACK (manufacturer-specific opcode
# 0xf0, docs/WIRE.md), which it shows as vendor-specific data. Their opcode
# and ICRC are still checked.
WS40_UNKNOWN = {"CNP", "RC_ATOMIC_WRITE", "SR_SACK"}


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def to_int(text, raw_bytes=False):
    text = text.strip()
    if raw_bytes:
        return int(text.replace(":", ""), 16) if text else None
    if text in ("True", "False"):
        return int(text == "True")
    if text.startswith("0x") or text.startswith("0X"):
        return int(text, 16)
    return int(text, 0) if text else None


def read_pcap(path):
    data = open(path, "rb").read()
    magic, = struct.unpack_from("<I", data, 0)
    assert magic == 0xA1B2C3D4, "not a little-endian microsecond pcap"
    linktype, = struct.unpack_from("<I", data, 20)
    assert linktype == 1, "link type is not Ethernet"
    off, frames = 24, []
    while off < len(data):
        _, _, incl, orig = struct.unpack_from("<IIII", data, off)
        off += 16
        frames.append(data[off:off + incl])
        assert incl == orig
        off += incl
    return frames


def icrc_a17(ip):
    """ICRC of a RoCEv2 IP packet (ICRC trailer included), IBTA Annex A17."""
    m = bytearray(ip[:-4])
    if m[0] >> 4 == 4:
        assert m[0] & 0x0F == 5
        m[1] = 0xFF          # TOS
        m[8] = 0xFF          # TTL
        m[10:12] = b"\xff\xff"  # header checksum
        l3 = 20
    else:
        m[0] |= 0x0F         # traffic class (high nibble)
        m[1:4] = b"\xff\xff\xff"  # traffic class (low nibble), flow label
        m[7] = 0xFF          # hop limit
        l3 = 40
    m[l3 + 6:l3 + 8] = b"\xff\xff"  # UDP checksum
    m[l3 + 8 + 4] = 0xFF            # BTH FECN/BECN/reserved
    return zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF


def main():
    tool, family, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    pcap = f"{workdir}/sample-{family}.pcap"
    args = [tool, "--sample-pcap", pcap] + (["--ipv6"] if family == "ipv6" else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    expected = []
    for line in out.splitlines():
        words = line.split()
        fields = dict(w.split("=", 1) for w in words[1:])
        expected.append(fields)
    if len(expected) < 38:
        fail(f"srdma-wire wrote {len(expected)} packets, expected one per opcode (38)")

    # The samples carry arbitrary payload bytes: switch off the upper-layer
    # heuristics that guess what an InfiniBand payload holds (RPC-over-RDMA,
    # SMB Direct, ...) so that only the InfiniBand dissection is judged.
    heur = subprocess.run(["tshark", "-G", "heuristic-decodes"], capture_output=True,
                          text=True).stdout
    disable = []
    for line in heur.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] == "infiniband.payload":
            # "ethertype" here is the Ethernet-over-IB heuristic, whose
            # protocol is needed for the outer Ethernet frame itself.
            if parts[1] == "ethertype":
                disable += ["--disable-heuristic", "eth_over_ib"]
            else:
                disable += ["--disable-protocol", parts[1]]

    cols = OTHER_FIELDS + ["infiniband." + f for f in IB_FIELDS]
    cmd = ["tshark", "-r", pcap, "-n", "-o", "ip.check_checksum:TRUE", "-o",
           "udp.check_checksum:TRUE", "-T", "fields", "-E", "separator=\t", "-E",
           "occurrence=f"] + disable
    for c in cols:
        cmd += ["-e", c]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"tshark exited {res.returncode}: {res.stderr.strip()}")
    rows = [r.split("\t") for r in res.stdout.splitlines()]
    # The verbose dissection must also come out clean.
    verbose = subprocess.run(["tshark", "-r", pcap, "-V"] + disable, capture_output=True,
                             text=True)
    if verbose.returncode != 0 or "Malformed" in verbose.stdout:
        fail("tshark -V reports a malformed packet or failed")

    frames = read_pcap(pcap)
    if len(rows) != len(expected) or len(frames) != len(expected):
        fail(f"{len(expected)} packets written, tshark saw {len(rows)}, pcap holds {len(frames)}")

    for i, (want, row, frame) in enumerate(zip(expected, rows, frames)):
        got = dict(zip(cols, row + [""] * (len(cols) - len(row))))
        name = f"packet {i} ({want['name']})"
        protos = got["frame.protocols"].split(":")
        if "infiniband" not in protos or "udp" not in protos:
            fail(f"{name}: not dissected as InfiniBand over UDP: {got['frame.protocols']}")
            continue
        if got["udp.dstport"] != "4791":
            fail(f"{name}: UDP destination port {got['udp.dstport']}")
        if got["_ws.malformed"] or got["_ws.expert.severity"]:
            fail(f"{name}: tshark flags it (malformed={got['_ws.malformed']!r} "
                 f"expert={got['_ws.expert.severity']!r})")
        if family == "ipv4" and got["ip.checksum.status"] != "1":
            fail(f"{name}: IP checksum status {got['ip.checksum.status']!r}")
        if got["udp.checksum.status"] != "1":
            fail(f"{name}: UDP checksum status {got['udp.checksum.status']!r}")
        if to_int(got["infiniband.bth.opcode"]) != int(want["opcode"]):
            fail(f"{name}: opcode {got['infiniband.bth.opcode']} != {want['opcode']}")
        for key, value in want.items():
            if key in ("opcode", "name", "payload_len"):
                continue
            if want["name"] in WS40_UNKNOWN:
                break  # Wireshark 4.0 dissects no header after the BTH
            col = "infiniband." + FIELD_ALIAS.get(key, key)
            if col not in got:
                fail(f"{name}: no tshark column for {key}")
                continue
            if to_int(got[col], key in BYTES_FIELDS) != int(value):
                fail(f"{name}: {key}: tshark says {got[col]!r}, encoded {value}")

        ip = frame[14:]
        want_icrc = icrc_a17(ip)
        wire_icrc, = struct.unpack("<I", ip[-4:])
        if wire_icrc != want_icrc:
            fail(f"{name}: ICRC on the wire {wire_icrc:#010x}, Annex A17 gives {want_icrc:#010x}")
        shown = got["infiniband.invariant.crc"]
        # Wireshark 4.0 shows no ICRC field for opcodes it does not know.
        if shown and to_int(shown) != struct.unpack(">I", ip[-4:])[0]:
            fail(f"{name}: tshark's Invariant CRC {shown} differs from the trailer bytes")
        if not shown and want["name"] not in WS40_UNKNOWN:
            fail(f"{name}: tshark shows no Invariant CRC")

    print(f"{len(expected)} packets checked ({family}), {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
