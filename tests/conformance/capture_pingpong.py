#!/usr/bin/env python3
"""Conformance: softrdma's real traffic is RoCEv2 on the wire.

usage: capture_pingpong.py LIBDIR PORT WORKDIR

Captures UDP port 4791 on loopback with tshark while Debian's unmodified
`ibv_rc_pingpong -g 0 -c -s 8192 -n 50` server and client run through
softrdma's libibverbs.so.1 (LIBDIR), then checks the capture
(WORKDIR/capture_rc_pingpong.pcap). Other tests running in parallel also
send RoCEv2 over loopback: their packets are counted and ignored, and the
packets between the two pingpong processes (told apart by the addresses in
their printed GIDs) go to WORKDIR/capture_rc_pingpong.pair.pcap, which tshark
dissects and which is kept (the full capture is kept only on failure). For
those packets it asserts:
  - the capture is not empty and holds every data packet: ibv_rc_pingpong's
    default path MTU is 1024 (-m), so each 8192-byte SEND is FIRST + 6 MIDDLE
    + LAST = 8 packets, 50 messages each way = 800 data packets, plus ACKs;
  - every packet dissects as eth:ip:udp:infiniband, UDP destination port 4791,
    with an RC opcode (0x00-0x1F; here SEND FIRST/MIDDLE/LAST and ACKNOWLEDGE)
    or softrdma's SACK (0xF0, docs/WIRE.md) with the agreement bit set,
    and tshark flags nothing (no malformed packet, no expert info);
  - IPv4 header: DF set, identification 0, header checksum good;
  - destination QPs are the QPNs the pingpong printed ("local address: ...
    QPN 0x..." of the receiving side), the first PSN each side sends is the
    PSN it printed, the data PSNs are contiguous, every payload is 1024
    bytes, and the last ACK each way acknowledges the last data PSN;
  - the ICRC of every packet is right, recomputed here from the captured IP
    header with zlib.crc32 per IBTA Annex A17 (independent of src/wire), and
    equals tshark's infiniband.invariant.crc.
Both sides run with SOFTRDMA_GSO=0: a capture on lo sees a GSO train as the
one large datagram the kernel passes to the receiving socket, never cut into
packets. The trains' segments, as a link carries them, are checked in
netns_pingpong.sh (veth with segmentation offload off, pcap_icrc.py).
"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib

SIZE, ITERS, PMTU = 8192, 50, 1024  # PMTU: ibv_rc_pingpong's default -m
PP_ARGS = ["-g", "0", "-c", "-s", str(SIZE), "-n", str(ITERS)]
PP_TIMEOUT = 40        # each pingpong side, seconds
CAPTURE_LIMIT = 90     # tshark -a duration, seconds (ctest TIMEOUT is 120)
OP_NAMES = {0x00: "SEND FIRST", 0x01: "SEND MIDDLE", 0x02: "SEND LAST", 0x04: "SEND ONLY",
            0x11: "ACKNOWLEDGE"}
DATA_OPS = {0x00, 0x01, 0x02}
# softrdma's SACK (docs/WIRE.md), a manufacturer-specific opcode (IBA Table
# 38) sent only to a peer whose requests carry the agreement bit (0x40 of
# BTH byte 8). Two softrdma processes agree by default, and a probe or a
# duplicate draws a D-SACK even on a lossless wire. tshark dissects it as
# vendor data, without an Invariant CRC field.
OP_SACK = 0xF0
# A SEND with bit 5 of BTH byte 8 carries softrdma's RPETH (docs/WIRE.md):
# 8 bytes between the BTH and the payload, which tshark shows as payload.
RESV7_RPH, RPETH_LEN = 0x20, 8

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def log(msg):
    print(msg, flush=True)


def icrc(ip):
    """RoCEv2 ICRC of an IP packet whose last 4 bytes are the ICRC (Annex A17):
    CRC-32 over 8 bytes of 0xFF (the masked LRH stand-in), then the IP header,
    UDP header, BTH and payload with the variant fields set to all ones."""
    m = bytearray(ip[:-4])
    if m[0] >> 4 == 4:
        l3 = (m[0] & 0x0F) * 4
        m[1] = 0xFF                      # DSCP/ECN
        m[8] = 0xFF                      # TTL
        m[10:12] = b"\xff\xff"           # header checksum
    else:
        l3 = 40
        m[0] |= 0x0F                     # traffic class, high nibble
        m[1:4] = b"\xff\xff\xff"         # traffic class low nibble, flow label
        m[7] = 0xFF                      # hop limit
    m[l3 + 6:l3 + 8] = b"\xff\xff"       # UDP checksum
    m[l3 + 8 + 4] = 0xFF                 # BTH byte 4: FECN, BECN, reserved
    return zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF


def read_pcap(path):
    """(file header, [(record header, frame)]) of a classic pcap."""
    data = open(path, "rb").read()
    if len(data) < 24:
        raise ValueError(f"{path}: {len(data)} bytes, no pcap header")
    magic, = struct.unpack_from("<I", data, 0)
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise ValueError(f"{path}: not a little-endian pcap (magic {magic:#x})")
    linktype, = struct.unpack_from("<I", data, 20)
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, expected Ethernet (1)")
    off, records = 24, []
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack_from("<IIII", data, off)
        if incl != orig or off + 16 + incl > len(data):
            raise ValueError(f"frame {len(records) + 1} truncated ({incl} of {orig} bytes)")
        records.append((data[off:off + 16], data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return data[:24], records


def heuristic_disables():
    """The pingpong buffers hold arbitrary bytes: switch off the dissectors
    that guess what an InfiniBand payload carries (RPC-over-RDMA, SMB Direct,
    ...) so that only the InfiniBand dissection is judged. Same trick as
    tshark_sample.py."""
    heur = subprocess.run(["tshark", "-G", "heuristic-decodes"], capture_output=True,
                          text=True, timeout=60).stdout
    disable = []
    for line in heur.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] == "infiniband.payload":
            if parts[1] == "ethertype":
                disable += ["--disable-heuristic", "eth_over_ib"]
            else:
                disable += ["--disable-protocol", parts[1]]
    return disable


def wait_listener(port, proc, limit=10.0):
    """Wait for the server's TCP listener; look, don't connect (the server
    takes the first connection as its peer)."""
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                             text=True).stdout
        if out.strip():
            return True
        time.sleep(0.1)
    return False


def parse_pp(text):
    """(local QPN, local PSN, local GID, remote QPN, remote PSN, remote GID)"""
    got = {}
    for side in ("local", "remote"):
        m = re.search(side + r" address:\s+LID 0x[0-9a-f]+, QPN 0x([0-9a-f]+), "
                      r"PSN 0x([0-9a-f]+), GID (\S+)", text)
        if not m:
            return None
        got[side] = (int(m.group(1), 16), int(m.group(2), 16), m.group(3))
    return got


def v4_of_gid(gid):
    m = re.fullmatch(r"::ffff:(\d+\.\d+\.\d+\.\d+)", gid)
    return m.group(1) if m else None


def stop(proc, sig=signal.SIGTERM, grace=5.0):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_capture(libdir, port, pcap, ts_log):
    """Start the capture, run the pair, stop the capture. Returns the
    pingpong outputs (server, client) or None."""
    procs = []
    try:
        with open(ts_log, "w") as tl:
            # -B: a large kernel buffer so that a parallel test's burst does
            # not make the capture drop our packets.
            ts = subprocess.Popen(["tshark", "-n", "-i", "lo", "-f", "udp port 4791",
                                   "-B", "64", "-F", "pcap", "-w", pcap,
                                   "-a", f"duration:{CAPTURE_LIMIT}", "-c", "1000000"],
                                  stdout=tl, stderr=subprocess.STDOUT)
        procs.append(ts)
        # Capturing for real: tshark says so and dumpcap has written the
        # pcap header (it does after the capture handle and filter are set).
        end = time.monotonic() + 30
        ready = False
        while time.monotonic() < end and ts.poll() is None:
            if ("Capturing on" in open(ts_log).read() and os.path.exists(pcap)
                    and os.path.getsize(pcap) >= 24):
                ready = True
                break
            time.sleep(0.1)
        if not ready:
            fail(f"tshark did not start capturing: {open(ts_log).read().strip()}")
            return None
        log(f"capturing on lo (udp port 4791) into {pcap}")

        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        env.pop("SOFTRDMA_ADDR", None)  # the default: auto-claimed 127.x.y.z
        env["SOFTRDMA_GSO"] = "0"       # one datagram per packet on lo (see above)
        env["SOFTRDMA_SHM"] = "0"       # same host: would bypass the wire otherwise
        cmd = ["timeout", str(PP_TIMEOUT), "ibv_rc_pingpong", "-p", str(port)] + PP_ARGS
        srv = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        procs.append(srv)
        if not wait_listener(port, srv):
            fail("the pingpong server never listened on TCP port %d" % port)
        cli = subprocess.run(cmd + ["127.0.0.1"], env=env, capture_output=True, text=True,
                             timeout=PP_TIMEOUT + 10)
        try:
            srv_out, _ = srv.communicate(timeout=PP_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            stop(srv, signal.SIGKILL)
            srv_out = "(server hung)"
        cli_out = cli.stdout + cli.stderr
        log(f"--- server (exit {srv.returncode})\n{srv_out.rstrip()}")
        log(f"--- client (exit {cli.returncode})\n{cli_out.rstrip()}")
        if srv.returncode != 0 or cli.returncode != 0:
            fail(f"pingpong exit codes: server={srv.returncode} client={cli.returncode}")
        if "iters in" not in srv_out or "iters in" not in cli_out:
            fail("pingpong printed no result line")

        # Let dumpcap drain the ring, then stop it cleanly (SIGINT: the
        # pcap is flushed and closed).
        time.sleep(1.0)
        stop(ts, signal.SIGINT, grace=15)
        log(f"--- tshark (exit {ts.returncode})\n{open(ts_log).read().rstrip()}")
        m = re.search(r"(\d+) packets? dropped", open(ts_log).read())
        if m and int(m.group(1)) > 0:
            log(f"note: the capture reports {m.group(1)} dropped packets")
        return srv_out, cli_out
    finally:
        for p in reversed(procs):
            stop(p)


def main():
    libdir, port, workdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    # Terminated (ctest, a user): unwind so that run_capture's finally stops
    # tshark and the pingpong pair.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: terminated"))
    pcap = os.path.join(workdir, "capture_rc_pingpong.pcap")
    ts_log = os.path.join(workdir, "capture_rc_pingpong.tshark.log")
    for f in (pcap, ts_log):
        if os.path.exists(f):
            os.unlink(f)

    outs = run_capture(libdir, port, pcap, ts_log)
    if outs is None:
        return 1
    srv_pp, cli_pp = parse_pp(outs[0]), parse_pp(outs[1])
    if not srv_pp or not cli_pp:
        fail("no 'local address:/remote address:' lines from both sides")
        return 1
    # side -> (qpn, psn, ipv4 address)
    sides = {}
    for name, pp in (("server", srv_pp), ("client", cli_pp)):
        qpn, psn, gid = pp["local"]
        addr = v4_of_gid(gid)
        if not addr or not addr.startswith("127."):
            fail(f"{name}: GID {gid} is not a softrdma loopback GID ::ffff:127.x.y.z")
            return 1
        sides[name] = (qpn, psn, addr)
        log(f"{name}: QPN {qpn:#08x} PSN {psn:#08x} address {addr}")
    if srv_pp["remote"][:2] != cli_pp["local"][:2] or cli_pp["remote"][:2] != srv_pp["local"][:2]:
        fail("the two sides disagree on the exchanged QPN/PSN")
    by_addr = {v[2]: (k, v) for k, v in sides.items()}
    if len(by_addr) != 2:
        fail("server and client bound the same address")
        return 1

    try:
        pcap_hdr, records = read_pcap(pcap)
    except (OSError, ValueError) as e:
        fail(f"cannot read the capture: {e}")
        return 1
    if not records:
        fail("the capture is empty")
        return 1
    # Keep the pair's packets (IPv4, source and destination the two
    # pingpong addresses): tests running in parallel send RoCEv2 over
    # loopback too. Those are written to a pcap of their own for tshark.
    pair = {socket.inet_aton(a) for a in by_addr}
    kept = [(h, f) for h, f in records
            if len(f) >= 34 and f[12:14] == b"\x08\x00" and f[26:30] in pair
            and f[30:34] in pair and f[26:30] != f[30:34]]
    frames = [f for _, f in kept]
    foreign = len(records) - len(frames)
    pair_pcap = os.path.join(workdir, "capture_rc_pingpong.pair.pcap")
    with open(pair_pcap, "wb") as out:
        out.write(pcap_hdr + b"".join(h + f for h, f in kept))
    log(f"capture: {len(records)} packets, {len(frames)} between the pingpong pair "
        f"(written to {pair_pcap}), {foreign} from other tests (ignored)")
    if not frames:
        fail("the capture holds no packet between the pingpong pair")
        return 1

    disable = heuristic_disables()
    cols = ["frame.number", "frame.protocols", "_ws.malformed", "_ws.expert.severity",
            "ip.src", "ip.dst", "ip.flags.df", "ip.id", "ip.checksum.status",
            "udp.dstport", "udp.length", "infiniband.bth.opcode", "infiniband.bth.destqp",
            "infiniband.bth.psn", "infiniband.bth.padcnt", "infiniband.aeth.syndrome",
            "infiniband.invariant.crc"]
    cmd = ["tshark", "-r", pair_pcap, "-n", "-o", "ip.check_checksum:TRUE", "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=f"] + disable
    for c in cols:
        cmd += ["-e", c]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        fail(f"tshark -r exited {res.returncode}: {res.stderr.strip()}")
    rows = [dict(zip(cols, r.split("\t") + [""] * len(cols))) for r in res.stdout.splitlines()]
    if len(rows) != len(frames):
        fail(f"{pair_pcap} holds {len(frames)} frames, tshark shows {len(rows)}")
        return 1
    verbose = subprocess.run(["tshark", "-r", pair_pcap, "-n", "-V"] + disable, capture_output=True,
                             text=True, timeout=120)
    if verbose.returncode != 0 or "Malformed" in verbose.stdout:
        fail("tshark -V reports a malformed packet or failed")

    ours = 0
    opcodes = {}
    # per sending side: data PSNs, payload bytes, data packet count, ACKed PSNs
    data_psns = {k: [] for k in sides}
    payload = {k: 0 for k in sides}
    acked = {k: [] for k in sides}  # PSNs the *other* side acknowledged of k's data
    bad_icrc = 0
    sacks_from = {k: 0 for k in sides}
    rpeths = 0
    for row, frame in zip(rows, frames):
        src, dst = row["ip.src"], row["ip.dst"]
        if src not in by_addr or dst not in by_addr or src == dst:
            fail(f"frame {row['frame.number']}: tshark shows {src}->{dst}, not the pair")
            continue
        ours += 1
        name = f"frame {row['frame.number']} {src}->{dst}"
        sender, (_, _, _) = by_addr[src]
        receiver, (rqpn, _, _) = by_addr[dst]
        protos = row["frame.protocols"].split(":")
        if protos[:5] != ["eth", "ethertype", "ip", "udp", "infiniband"]:
            fail(f"{name}: not dissected as InfiniBand over UDP: {row['frame.protocols']}")
            continue
        if row["udp.dstport"] != "4791":
            fail(f"{name}: UDP destination port {row['udp.dstport']}")
        if row["_ws.malformed"] or row["_ws.expert.severity"]:
            fail(f"{name}: tshark flags it (malformed={row['_ws.malformed']!r} "
                 f"expert={row['_ws.expert.severity']!r})")
        ip = frame[14:]
        flags_frag, = struct.unpack_from(">H", ip, 6)
        ip_id, = struct.unpack_from(">H", ip, 4)
        if not flags_frag & 0x4000 or flags_frag & 0x3FFF or ip_id != 0:
            fail(f"{name}: IPv4 DF/fragment {flags_frag:#06x}, ID {ip_id:#06x} "
                 "(expected DF, offset 0, ID 0)")
        if row["ip.flags.df"] not in ("1", "True") or int(row["ip.id"], 0) != 0:
            fail(f"{name}: tshark shows DF={row['ip.flags.df']} ID={row['ip.id']}")
        if row["ip.checksum.status"] != "1":
            fail(f"{name}: IPv4 header checksum status {row['ip.checksum.status']!r}")
        tot_len, = struct.unpack_from(">H", ip, 2)
        if tot_len != len(ip):
            fail(f"{name}: IPv4 total length {tot_len}, frame carries {len(ip)}")
            continue
        op = int(row["infiniband.bth.opcode"], 0)
        opcodes[op] = opcodes.get(op, 0) + 1
        bth = ip[(ip[0] & 0x0F) * 4 + 8:]
        if op == OP_SACK:
            if not bth[8] & 0x40:
                fail(f"{name}: a SACK without the agreement bit")
        elif not 0x00 <= op <= 0x1F:
            fail(f"{name}: opcode {op:#04x} is not an RC opcode")
        elif op not in OP_NAMES:
            fail(f"{name}: opcode {op:#04x} unexpected in a SEND pingpong")
        dqp = int(row["infiniband.bth.destqp"], 0)
        if dqp != rqpn:
            fail(f"{name}: destination QP {dqp:#08x}, {receiver} printed QPN {rqpn:#08x}")
        psn = int(row["infiniband.bth.psn"], 0)
        # payload = UDP length - UDP header - BTH - ICRC - pad (no other
        # extension headers in SENDs, but the RPETH; ACKs add the 4-byte AETH)
        plen = int(row["udp.length"]) - 8 - 12 - 4 - int(row["infiniband.bth.padcnt"] or 0)
        if op in DATA_OPS and bth[8] & RESV7_RPH:
            # an RPETH (docs/WIRE.md): only beside the agreement bit, after
            # a SACK from the peer; it names the message (every message
            # here is a SEND, one per SIZE bytes) and the payload's offset
            if not bth[8] & 0x40:
                fail(f"{name}: an RPETH without the agreement bit")
            if not sacks_from[receiver]:
                fail(f"{name}: an RPETH before any SACK from {receiver}")
            msg, off = struct.unpack_from(">II", bth, 12)
            i = (psn - sides[sender][1]) & 0xFFFFFF
            if (msg, off) != (i // (SIZE // PMTU), i % (SIZE // PMTU) * PMTU):
                fail(f"{name}: RPETH message {msg} offset {off} at its PSN")
            plen -= RPETH_LEN
            rpeths += 1
        if op == OP_SACK:
            sacks_from[sender] += 1
        if op in DATA_OPS:
            data_psns[sender].append(psn)
            payload[sender] += plen
            if plen != PMTU:
                fail(f"{name}: {OP_NAMES[op]} payload {plen} bytes, expected {PMTU}")
        elif op == 0x11:
            syn = int(row["infiniband.aeth.syndrome"], 0)
            if syn >> 5 != 0:
                log(f"note: {name}: NAK/RNR syndrome {syn:#04x}")
            else:
                acked[receiver].append(psn)
            if plen != 4:
                fail(f"{name}: ACK carries {plen - 4} bytes beyond the AETH")

        want = icrc(ip)
        wire, = struct.unpack("<I", ip[-4:])
        if wire != want:
            bad_icrc += 1
            fail(f"{name}: ICRC on the wire {wire:#010x}, Annex A17 gives {want:#010x}")
        shown = row["infiniband.invariant.crc"]
        if op == OP_SACK:
            pass
        elif not shown:
            fail(f"{name}: tshark shows no Invariant CRC")
        elif int(shown, 0) != struct.unpack(">I", ip[-4:])[0]:
            fail(f"{name}: tshark's Invariant CRC {shown} differs from the trailer bytes")

    per_msg = -(-SIZE // PMTU)
    want_data = ITERS * per_msg
    log(f"SENDs with an RPETH: {rpeths}")
    log("opcodes: " + ", ".join(f"{'SACK' if o == OP_SACK else OP_NAMES.get(o, hex(o))} x{n}"
                                for o, n in sorted(opcodes.items())))
    if ours < 2 * want_data + 2:
        fail(f"{ours} packets between the pair, expected at least 2 x {ITERS} x {per_msg} "
             f"data packets plus ACKs = {2 * want_data + 2}")
    for side, (qpn, psn0, addr) in sides.items():
        psns = data_psns[side]
        want = {(psn0 + i) & 0xFFFFFF for i in range(want_data)}
        log(f"{side} ({addr}) sent {len(psns)} data packets, {payload[side]} payload bytes, "
            f"got {len(acked[side])} ACKs")
        if not psns:
            fail(f"{side}: sent no data packets")
            continue
        if psns[0] != psn0:
            fail(f"{side}: first data PSN {psns[0]:#08x}, it printed PSN {psn0:#08x}")
        if set(psns) != want:
            fail(f"{side}: data PSNs are not exactly {psn0:#08x} + 0..{want_data - 1} "
                 f"({len(set(psns))} distinct)")
        if len(psns) > want_data:
            log(f"note: {side}: {len(psns) - want_data} retransmitted data packets")
        if payload[side] < ITERS * SIZE:
            fail(f"{side}: {payload[side]} payload bytes, expected {ITERS * SIZE}")
        last = (psn0 + want_data - 1) & 0xFFFFFF
        if not acked[side] or acked[side][-1] != last:
            fail(f"{side}: last ACK {acked[side][-1] if acked[side] else None!r} is not for "
                 f"the last data PSN {last:#08x}")
    log(f"checked {ours} packets: InfiniBand over UDP 4791, RC opcodes, QPNs, PSNs, "
        f"IPv4 DF/ID 0, ICRC (zlib, Annex A17; {bad_icrc} wrong) and tshark's Invariant CRC")
    log(f"{len(failures)} failures")
    if failures:
        log(f"FAIL (captures kept: {pcap}, {pair_pcap})")
        return 1
    # The full capture also holds the parallel tests' traffic (tens of MB
    # under ctest -j); the pair's pcap stays for inspection.
    os.unlink(pcap)
    log(f"PASS (the pair's packets: {pair_pcap})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
