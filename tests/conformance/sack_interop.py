#!/usr/bin/env python3
"""Interop: a softrdma device restricted to standard RoCEv2 (SOFTRDMA_SACK=0)
against one with selective recovery, both ways, on a lossy wire.

usage: sack_interop.py LIBDIR PORT WORKDIR

Runs Debian's unmodified `ibv_rc_pingpong -g 0 -c -s 65536 -n 20` (-c: the
contents are checked) through softrdma's libibverbs.so.1 under
SOFTRDMA_FAULT (loss 5%, reordering 2%) over UDP, while tshark captures
loopback port 4791, three times:
  1. server restricted, client with SACK;
  2. server with SACK, client restricted;
  3. both with SACK (the positive control).
Each side binds its own address (127.77.N.1 / .2, N from the port), so the
pair's packets are told from parallel tests' by address. Asserts:
  - every run exits 0 (every byte arrived, every completion succeeded);
  - runs 1 and 2: no SR_SACK (opcode 0xf0) in the capture, no packet from
    the restricted side carries the agreement bit (BTH Resv7 0x40), no
    response towards it carries it either (only the SACK side's requests
    do), and neither side's counters show a SACK or a request kept out of
    order;
  - run 3: SACKs were sent and taken, and every one carried the bit;
  - tshark flags nothing malformed in the pair's packets.
"""
import os
import re
import struct
import subprocess
import sys
import time

PP_ARGS = ["-g", "0", "-c", "-s", "65536", "-n", "20"]
FAULT = "loss=0.05,reorder=0.02"
PP_TIMEOUT = 60
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def stats(text):
    out = {}
    for line in text.splitlines():
        if "softrdma: stats" in line:
            for k, v in re.findall(r"(\w+)=(\d+)", line):
                out[k] = out.get(k, 0) + int(v)
    return out


def read_frames(path):
    data = open(path, "rb").read()
    off, frames = 24, []
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from("<IIII", data, off)
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def wait_listener(port, proc, limit=10.0):
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                             text=True).stdout
        if out.strip():
            return True
        time.sleep(0.1)
    return False


def run(libdir, port, work, tag, srv_sack, cli_sack, net):
    a_srv, a_cli = f"127.77.{net}.1", f"127.77.{net}.2"
    pcap = os.path.join(work, f"sack_interop_{tag}.pcap")
    ts = subprocess.Popen(["tshark", "-n", "-i", "lo", "-F", "pcap", "-w", pcap, "-a", "duration:80",
                           "-f", f"udp port 4791 and host {a_srv} and host {a_cli}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # tshark says "Capturing on" once the filter is installed
    line = ts.stderr.readline().decode(errors="replace")
    end = time.monotonic() + 10
    while "Capturing" not in line and time.monotonic() < end and ts.poll() is None:
        line = ts.stderr.readline().decode(errors="replace")
    base = dict(os.environ, LD_LIBRARY_PATH=libdir, SOFTRDMA_SHM="0", SOFTRDMA_GSO="0",
                SOFTRDMA_STATS="1")
    env_s = dict(base, SOFTRDMA_ADDR=a_srv, SOFTRDMA_SACK="1" if srv_sack else "0",
                 SOFTRDMA_FAULT=FAULT + f",seed={port}")
    env_c = dict(base, SOFTRDMA_ADDR=a_cli, SOFTRDMA_SACK="1" if cli_sack else "0",
                 SOFTRDMA_FAULT=FAULT + f",seed={port + 1}")
    cmd = ["timeout", str(PP_TIMEOUT), "ibv_rc_pingpong", "-p", str(port)] + PP_ARGS
    srv = subprocess.Popen(cmd, env=env_s, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if not wait_listener(port, srv):
        fail(f"{tag}: server did not listen")
    cli = subprocess.run(cmd + ["127.0.0.1"], env=env_c, capture_output=True, timeout=PP_TIMEOUT + 10)
    s_out = srv.communicate(timeout=PP_TIMEOUT + 10)[0].decode(errors="replace")
    c_out = (cli.stdout + cli.stderr).decode(errors="replace")
    time.sleep(0.5)
    ts.terminate()
    ts.wait(timeout=20)
    if srv.returncode or cli.returncode:
        fail(f"{tag}: exit server {srv.returncode} client {cli.returncode}\n{s_out}\n{c_out}")
    st_s, st_c = stats(s_out), stats(c_out)
    frames = read_frames(pcap) if os.path.exists(pcap) else []
    ib = []
    for f in frames:
        if len(f) < 14 + 20 + 8 + 12 or f[12:14] != b"\x08\x00":
            continue
        ip = f[14:]
        src = ".".join(str(b) for b in ip[12:16])
        bth = ip[(ip[0] & 15) * 4 + 8:]
        ib.append((src, bth[0], bth[8] & 0x7F))
    if len(ib) < 100:
        fail(f"{tag}: only {len(ib)} packets captured between the pair")
    restricted = a_srv if not srv_sack else a_cli if not cli_sack else None
    sacks = [p for p in ib if p[1] == 0xF0]
    if restricted:
        if sacks:
            fail(f"{tag}: {len(sacks)} SR_SACK packets on the wire")
        marked_from = [p for p in ib if p[0] == restricted and p[2] & 0x40]
        if marked_from:
            fail(f"{tag}: {len(marked_from)} packets from the restricted side carry Resv7 0x40")
        # towards the restricted side: requests may carry the bit, responses never
        resp_ops = {0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12}
        marked_resp = [p for p in ib if p[0] != restricted and p[1] in resp_ops and p[2] & 0x40]
        if marked_resp:
            fail(f"{tag}: {len(marked_resp)} responses towards the restricted side marked")
        for side, st in (("server", st_s), ("client", st_c)):
            for k in ("sacks_sent", "sacks_rcvd", "ooo_stored"):
                if st.get(k, 0):
                    fail(f"{tag}: {side} {k}={st[k]}")
    else:
        if not sacks or not st_s.get("sacks_sent", 0) + st_c.get("sacks_sent", 0):
            fail(f"{tag}: no SACK between two SACK devices under loss")
        if any(not p[2] & 0x40 for p in sacks):
            fail(f"{tag}: a SACK without the agreement bit")
    lost = st_s.get("fault_lost", 0) + st_c.get("fault_lost", 0)
    if not lost:
        fail(f"{tag}: no loss injected")
    tsh = subprocess.run(["tshark", "-n", "-r", pcap, "-Y", "_ws.malformed && infiniband",
                          "-T", "fields", "-e", "frame.number"], capture_output=True, text=True,
                         timeout=120).stdout.split()
    if tsh:
        fail(f"{tag}: tshark flags {len(tsh)} InfiniBand packets malformed")
    print(f"{tag}: {len(ib)} packets, {len(sacks)} SACKs, {lost} lost; "
          f"server sacks_sent={st_s.get('sacks_sent', 0)} client sacks_rcvd="
          f"{st_c.get('sacks_rcvd', 0)} retransmits={st_s.get('retransmits', 0) + st_c.get('retransmits', 0)}",
          flush=True)
    if not failures:
        os.unlink(pcap)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    libdir, port, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    net = port % 250 + 1
    run(libdir, port, work, "restricted_server", False, True, net)
    run(libdir, port + 2, work, "restricted_client", True, False, net)
    run(libdir, port + 4, work, "both_sack", True, True, net)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
