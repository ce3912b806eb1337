#!/usr/bin/env python3
"""The CM's MADs on the wire, as tshark dissects them.

usage: rdmacm_capture.py LIBDIR RPING MODE WORKDIR     MODE: lo | netns

lo:    tshark on lo (udp port 4791) while Debian's rping server and client
       run over softrdma's librdmacm with SOFTRDMA_SHM=0 (-C 10), then a
       client to a port nobody listens on (REQ, REJ).
netns: two network namespaces joined by a veth pair (10.232.0.1/24 and
       10.232.0.2/24), rping's server in A with SOFTRDMA_ADDR=10.232.0.1, its
       client in B with SOFTRDMA_ADDR=10.232.0.2 connecting to 10.232.0.1;
       tshark on B's veth end. The REQ goes to the GID of a real interface
       address (::ffff:10.232.0.1). Exit 77 when namespaces cannot be made.
Checks, for the packets to or from QP1 between the pair (told apart by the
addresses SOFTRDMA_CM_TRACE prints; parallel tests' traffic is ignored):
every one dissects as InfiniBand with a MAD of class 0x07 (CM), class
version 2, method Send and the attribute ID of a CM message, or Get/GetResp
of ClassPortInfo (the CM's liveness probe); tshark flags nothing
(no malformed packet, no expert info) and shows the CM message's own fields
(infiniband.cm.*); the ICRC is right (zlib, Annex A17, capture_pingpong.py's
icrc()) and equals tshark's Invariant CRC; the attribute IDs seen are REQ,
REP, RTU, DREQ, DREP (and REQ, REJ reason 8 for the unlistened port); in
netns mode the REQ's IP destination and Primary Remote Port GID are
10.232.0.1's.
"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
from capture_pingpong import heuristic_disables, icrc, read_pcap  # noqa: E402

CM_ATTRS = {0x01: "ClassPortInfo", 0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU", 0x15: "DREQ",
            0x16: "DREP"}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def start_tshark(prefix, iface, pcap, log):
    # only datagrams to QP1 (BTH DestQP, UDP payload bytes 5..7): on a busy
    # lo, every other test's RDMA traffic would fill the capture buffer and
    # the kernel would drop CM MADs with it
    ts = subprocess.Popen(prefix + ["tshark", "-n", "-i", iface, "-f",
                                    "udp dst port 4791 and udp[13:2] = 0 and udp[15] = 1", "-B", "64",
                                    "-F", "pcap", "-w", pcap, "-a", "duration:60"],
                          stdout=open(log, "w"), stderr=subprocess.STDOUT)
    end = time.monotonic() + 30
    while time.monotonic() < end and ts.poll() is None:
        if "Capturing on" in open(log).read() and os.path.exists(pcap) \
                and os.path.getsize(pcap) >= 24:
            return ts
        time.sleep(0.1)
    fail("tshark did not start: " + open(log).read())
    ts.kill()
    return None


def stop(p, sig=signal.SIGINT):
    if p and p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def rping_pair(env, rping, sprefix, cprefix, srv_addr, port):
    """server then client; returns their stderr (with the CM trace)."""
    srv = subprocess.Popen(sprefix + ["timeout", "30", rping, "-s", "-a", srv_addr, "-p", str(port),
                                      "-C", "10", "-V"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.7)
    cli = subprocess.run(cprefix + ["timeout", "30", rping, "-c", "-a", srv_addr, "-p", str(port),
                                    "-C", "10", "-V"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         timeout=40)
    try:
        _, serr = srv.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        srv.kill()
        _, serr = srv.communicate()
    if cli.returncode != 0 or srv.returncode != 0:
        fail(f"rping exit codes: server {srv.returncode}, client {cli.returncode}\n{serr}\n{cli.stderr}")
    return serr, cli.stderr


def peer_of(trace):
    """the address this side sent its MADs to (SOFTRDMA_CM_TRACE lines)"""
    m = re.findall(r"softrdma cm: \d+ send \S+ to (\d+\.\d+\.\d+\.\d+)", trace)
    return m[0] if m else None


def check(pcap, pair, workdir, want_attrs, req_dst=None):
    hdr, records = read_pcap(pcap)
    addrs = {socket.inet_aton(a) for a in pair}
    kept = []
    for h, f in records:
        if len(f) < 14 + 20 + 8 + 12 or f[12:14] != b"\x08\x00":
            continue
        ip = f[14:]
        l3 = (ip[0] & 0x0F) * 4
        if ip[12:16] not in addrs or ip[16:20] not in addrs:
            continue
        bth = ip[l3 + 8:]
        if struct.unpack(">I", bth[4:8])[0] & 0xFFFFFF != 1:
            continue  # not to QP1: the connection's own RC traffic
        kept.append((h, f))
    out = os.path.join(workdir, "cm_mads.pcap")
    with open(out, "wb") as o:
        o.write(hdr + b"".join(h + f for h, f in kept))
    print(f"capture: {len(records)} packets, {len(kept)} CM MADs between {pair} ({out})")
    if not kept:
        fail("no MAD to QP1 between the pair")
        return
    cols = ["frame.number", "frame.protocols", "_ws.malformed", "_ws.expert", "infiniband.bth.opcode",
            "infiniband.bth.destqp", "infiniband.deth.q_key", "infiniband.mad.baseversion",
            "infiniband.mad.mgmtclass", "infiniband.mad.classversion", "infiniband.mad.method",
            "infiniband.mad.attributeid", "infiniband.cm.req.serviceid",
            "infiniband.cm.rep.remotecommid", "infiniband.cm.rtu.localcommid",
            "infiniband.cm.rej.reason", "infiniband.cm.dreq.localcommid",
            "infiniband.invariant.crc"]
    cmd = ["tshark", "-r", out, "-n", "-T", "fields", "-E", "separator=\t", "-E",
           "occurrence=f"] + heuristic_disables()
    for c in cols:
        cmd += ["-e", c]
    res = run(cmd)
    rows = [dict(zip(cols, r.split("\t") + [""] * len(cols))) for r in res.stdout.splitlines()]
    if res.returncode or len(rows) != len(kept):
        fail(f"tshark -r: exit {res.returncode}, {len(rows)} rows for {len(kept)} frames: {res.stderr}")
        return
    verbose = run(["tshark", "-r", out, "-n", "-V"])
    if "Malformed" in verbose.stdout or "Expert Info" in verbose.stdout:
        fail("tshark -V reports a malformed packet or expert info")
    seen = []
    cm_field = {0x10: "infiniband.cm.req.serviceid", 0x13: "infiniband.cm.rep.remotecommid",
                0x14: "infiniband.cm.rtu.localcommid", 0x12: "infiniband.cm.rej.reason",
                0x15: "infiniband.cm.dreq.localcommid"}
    for row, (_, f) in zip(rows, kept):
        n = f"frame {row['frame.number']}"
        ip = f[14:]
        attr = int(row["infiniband.mad.attributeid"] or "-1", 0)
        name = CM_ATTRS.get(attr, hex(attr))
        seen.append(name)
        if "infiniband" not in row["frame.protocols"].split(":"):
            fail(f"{n}: not InfiniBand: {row['frame.protocols']}")
        if row["_ws.malformed"] or row["_ws.expert"]:
            fail(f"{n} {name}: tshark flags it (malformed '{row['_ws.malformed']}', "
                 f"expert '{row['_ws.expert']}')")
        if int(row["infiniband.bth.opcode"], 0) != 0x64:
            fail(f"{n}: BTH opcode {row['infiniband.bth.opcode']}, not UD SEND ONLY")
        if int(row["infiniband.deth.q_key"] or "0", 0) != 0x80010000:
            fail(f"{n}: Q_Key {row['infiniband.deth.q_key']}, not the GSI's 0x80010000")
        for k, want in (("infiniband.mad.baseversion", 1), ("infiniband.mad.mgmtclass", 7),
                        ("infiniband.mad.classversion", 2)):
            if int(row[k] or "-1", 0) != want:
                fail(f"{n} {name}: {k} = {row[k]!r}, expected {want}")
        # CM messages go with Send; the liveness probe is Get(ClassPortInfo)
        # and its GetResp (IBA 13.4.8.1, docs/CM.md)
        methods = (0x01, 0x81) if attr == 0x0001 else (0x03,)
        if int(row["infiniband.mad.method"] or "-1", 0) not in methods:
            fail(f"{n} {name}: method {row['infiniband.mad.method']!r}")
        if attr not in CM_ATTRS:
            fail(f"{n}: attribute {attr:#06x} is not a CM message")
        elif attr in cm_field and not row[cm_field[attr]]:
            fail(f"{n} {name}: tshark shows no {cm_field[attr]}")
        if attr == 0x12 and int(row["infiniband.cm.rej.reason"] or "0", 0) != 8:
            fail(f"{n}: REJ reason {row['infiniband.cm.rej.reason']}, expected 8")
        tot = struct.unpack(">H", ip[2:4])[0]
        pkt = ip[:tot]
        wire = struct.unpack("<I", pkt[-4:])[0]
        if wire != icrc(pkt):
            fail(f"{n} {name}: ICRC {wire:#010x}, Annex A17 gives {icrc(pkt):#010x}")
        if not row["infiniband.invariant.crc"] or \
                int(row["infiniband.invariant.crc"], 0) != struct.unpack(">I", pkt[-4:])[0]:
            fail(f"{n}: tshark's Invariant CRC {row['infiniband.invariant.crc']!r} differs")
        if attr == 0x10 and req_dst:
            l3 = (ip[0] & 0x0F) * 4
            mad = ip[l3 + 8 + 12 + 8:]
            gid = mad[24 + 72:24 + 88]
            if socket.inet_ntoa(ip[16:20]) != req_dst:
                fail(f"{n}: REQ to {socket.inet_ntoa(ip[16:20])}, not {req_dst}")
            if gid != b"\0" * 10 + b"\xff\xff" + socket.inet_aton(req_dst):
                fail(f"{n}: REQ's Primary Remote Port GID {gid.hex()}, not ::ffff:{req_dst}")
    print("CM MADs:", " ".join(seen))
    for a in want_attrs:
        if a not in seen:
            fail(f"no {a} in the capture")


def main():
    libdir, rping, mode, workdir = sys.argv[1:5]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: terminated"))
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, SOFTRDMA_SHM="0", SOFTRDMA_GSO="0",
               SOFTRDMA_CM_TRACE="1")
    env.pop("SOFTRDMA_ADDR", None)
    pcap = os.path.join(workdir, f"rdmacm_{mode}.pcap")
    log = pcap + ".log"
    port = 21000 + os.getpid() % 20000
    if mode == "lo":
        ts = start_tshark([], "lo", pcap, log)
        if not ts:
            return 1
        serr, cerr = rping_pair(env, rping, [], [], "127.0.0.1", port)
        rej = subprocess.run(["timeout", "10", rping, "-c", "-a", "127.0.0.1", "-p", str(port + 1),
                              "-C", "1"], env=env, capture_output=True, text=True, timeout=20)
        time.sleep(1)
        stop(ts)
        srv_addr, cli_addr = peer_of(cerr), peer_of(serr)
        rej_addr = peer_of(rej.stderr)
        print(f"server {srv_addr}, client {cli_addr}; unlistened-port client {rej_addr}")
        if not srv_addr or not cli_addr:
            fail("no CM trace from rping")
            return 1
        check(pcap, {srv_addr, cli_addr}, workdir, ["REQ", "REP", "RTU", "DREQ", "DREP"])
        if "RDMA_CM_EVENT_REJECTED, error 8" not in rej.stderr:
            fail("the client to a port nobody listens on saw no REJECTED, error 8: " + rej.stderr)
        elif rej_addr:
            # its REQ went to its own CM (docs/CM.md), which said REJ 8
            check(pcap, {rej_addr}, workdir, ["REQ", "REJ"])
    else:
        if os.geteuid() != 0:
            print("SKIP: not root")
            return 77
        tag = str(os.getpid())
        nsa, nsb, va, vb = "srcmA" + tag, "srcmB" + tag, "srcma" + tag, "srcmb" + tag
        try:
            for c in (["ip", "netns", "add", nsa], ["ip", "netns", "add", nsb],
                      ["ip", "link", "add", "name", va, "netns", nsa, "type", "veth", "peer",
                       "name", vb, "netns", nsb],
                      ["ip", "-n", nsa, "addr", "add", "10.232.0.1/24", "dev", va],
                      ["ip", "-n", nsb, "addr", "add", "10.232.0.2/24", "dev", vb],
                      ["ip", "-n", nsa, "link", "set", "lo", "up"],
                      ["ip", "-n", nsb, "link", "set", "lo", "up"],
                      ["ip", "-n", nsa, "link", "set", va, "up"],
                      ["ip", "-n", nsb, "link", "set", vb, "up"]):
                r = run(c)
                if r.returncode:
                    print(f"SKIP: {' '.join(c)}: {r.stderr.strip()}")
                    return 77
            ts = start_tshark(["ip", "netns", "exec", nsb], vb, pcap, log)
            if not ts:
                return 1
            sp = ["ip", "netns", "exec", nsa, "env", "SOFTRDMA_ADDR=10.232.0.1"]
            cp = ["ip", "netns", "exec", nsb, "env", "SOFTRDMA_ADDR=10.232.0.2"]
            rping_pair(env, rping, sp, cp, "10.232.0.1", port)
            time.sleep(1)
            stop(ts)
            check(pcap, {"10.232.0.1", "10.232.0.2"}, workdir,
                  ["REQ", "REP", "RTU", "DREQ", "DREP"], req_dst="10.232.0.1")
        finally:
            for ns in (nsa, nsb):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    print(f"{len(failures)} failures")
    if failures:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
