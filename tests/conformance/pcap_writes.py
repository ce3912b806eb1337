#!/usr/bin/env python3
"""Check the shape of the RC RDMA WRITEs in a capture of ib_write_bw (every
message written to the same remote buffer), independently of src/wire.

usage: pcap_writes.py PCAP MIN_PACKETS MTU SIZE only|whole

only:  every WRITE packet is a WRITE ONLY (SOFTRDMA_WRITE_ONLY, the default
       over UDP) carrying MTU bytes, its RETH's DMA length equal to them and
       its address a piece of the target buffer in step with its PSN; the
       ACK is asked for on a message's last piece and every 256th, and
       elsewhere at most once per 32 pieces (where the queue cap filled).
whole: every WRITE packet is a FIRST, MIDDLE or LAST of MTU bytes (SIZE a
       multiple of MTU), the FIRST's RETH covering SIZE bytes, the ACK asked
       for on each LAST (and inside the message every 256 packets over UDP,
       not checked).
Retransmitted packets (a PSN seen before) are skipped; a packet missing from
the capture does not upset the others' checks. MIN_PACKETS: at least that
many WRITE packets.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_pingpong import read_pcap  # noqa: E402

RC_WRITE = {6: "FIRST", 7: "MIDDLE", 8: "LAST", 9: "LAST_IMM", 10: "ONLY", 11: "ONLY_IMM"}


def writes(path):
    """(opcode, ack_req, psn, va, dma_len, payload_len) of each RC WRITE packet."""
    _, frames = read_pcap(path)
    for _, f in frames:
        ethertype, = struct.unpack_from("!H", f, 12)
        ip = f[14:]
        if ethertype == 0x0800:
            l3, proto = (ip[0] & 0x0F) * 4, ip[9]
        elif ethertype == 0x86DD:
            l3, proto = 40, ip[6]
        else:
            continue
        if proto != 17 or struct.unpack_from("!H", ip, l3 + 2)[0] != 4791:
            continue
        udp_len, = struct.unpack_from("!H", ip, l3 + 4)
        bth = ip[l3 + 8:l3 + udp_len]
        op = bth[0]
        if op not in RC_WRITE:
            continue
        pad = (bth[1] >> 4) & 3
        ack_req = bool(bth[8] & 0x80)
        psn = int.from_bytes(bth[9:12], "big")
        hdr = 12
        va = dma_len = None
        if op in (6, 10, 11):
            va, _rkey, dma_len = struct.unpack_from("!QII", bth, 12)
            hdr += 16
        if op in (9, 11):
            hdr += 4
        yield op, ack_req, psn, va, dma_len, len(bth) - hdr - pad - 4


def main():
    if len(sys.argv) != 6 or sys.argv[5] not in ("only", "whole"):
        print(__doc__)
        return 2
    path, want, mtu, size, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), sys.argv[5]
    pieces = size // mtu
    seen, pkts = set(), []
    for w in writes(path):
        if w[2] not in seen:  # a PSN seen before: a retransmission
            seen.add(w[2])
            pkts.append(w)
    # Positions come from PSNs and addresses, not from capture order, so a
    # packet the capture missed does not shift the rest (2^24 is a multiple
    # of pieces: PSNs wrap cleanly).
    bad, msgs, phase, extra = [], 0, None, 0
    base = min((w[3] for w in pkts if w[3] is not None), default=0)
    firsts = [w[2] for w in pkts if RC_WRITE[w[0]] == "FIRST"]
    for op, ack_req, psn, va, dma_len, payload in pkts:
        name = RC_WRITE[op]
        if payload != mtu:
            bad.append(f"PSN {psn}: {name} carries {payload} bytes, not {mtu}")
        if mode == "only":
            if name != "ONLY":
                bad.append(f"PSN {psn}: WRITE {name}, want WRITE ONLY")
                continue
            if dma_len != payload:
                bad.append(f"PSN {psn}: RETH DMA length {dma_len}, payload {payload}")
            off = va - base
            idx = off // mtu
            if off % mtu or idx >= pieces:
                bad.append(f"PSN {psn}: address {va:#x} is not a piece of the buffer at {base:#x}")
                continue
            start = (psn - idx) % pieces
            if phase is None:
                phase = start
            if start != phase:
                bad.append(f"PSN {psn}: piece {idx} out of step with its message's PSNs")
            due = idx == pieces - 1 or (idx + 1) % 256 == 0
            if due and not ack_req:
                bad.append(f"PSN {psn}: piece {idx} of {pieces} without AckReq")
            extra += ack_req and not due
            msgs += idx == pieces - 1
        else:
            pos = (psn - firsts[0]) % pieces if firsts else 0
            expect = "FIRST" if pos == 0 else "LAST" if pos == pieces - 1 else "MIDDLE"
            if name != expect:
                bad.append(f"PSN {psn}: WRITE {name}, want {expect} (packet {pos} of {pieces})")
            if name == "FIRST" and dma_len != size:
                bad.append(f"PSN {psn}: FIRST's RETH DMA length {dma_len}, want {size}")
            if name == "LAST" and not ack_req:
                bad.append(f"PSN {psn}: LAST without AckReq")
            msgs += name == "LAST"
    # Elsewhere a piece asks for an ACK only where it filled the queue cap
    # (src/engine/qcap.c: a cap below the 256 of trains, which a loaded
    # host's rate gives), which the capture cannot tell; the cap is at
    # least 64 packets, so at most about one per 64 pieces.
    if mode == "only" and extra * 32 > len(pkts):
        bad.append(f"{extra} pieces asked for an ACK besides the last and every 256th")
    for b in bad[:8]:
        print("FAIL:", b)
    print(f"{len(pkts)} WRITE packets ({mode}), {msgs} whole messages, {len(bad)} problems")
    if len(pkts) < want:
        print(f"FAIL: fewer than {want} WRITE packets")
    return 0 if not bad and len(pkts) >= want else 1


if __name__ == "__main__":
    sys.exit(main())
