#!/usr/bin/env bash
# The main job: build softrdma and show it at work. Today: encode one RoCEv2
# packet of every supported opcode with src/wire, write them to a capture and
# let tshark decode it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

out=build/softrdma-sample.pcap
echo "== srdma-wire: the opcode table =="
build/bin/srdma-wire --opcodes
echo
echo "== srdma-wire --sample-pcap $out =="
build/bin/srdma-wire --sample-pcap "$out" >/dev/null
echo
echo "== tshark: one line per packet =="
tshark -r "$out" -n -T fields -E header=y -E separator=/t \
  -e frame.number -e ip.dst -e udp.dstport -e infiniband.bth.opcode -e infiniband.bth.destqp \
  -e infiniband.bth.psn -e infiniband.invariant.crc 2>/dev/null
echo
echo "== tshark -V, packet 12 (RC RDMA WRITE ONLY with immediate) =="
tshark -r "$out" -n -V -Y frame.number==12 2>/dev/null | sed -n '/^InfiniBand/,$p'
