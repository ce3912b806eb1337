#!/usr/bin/env bash
# The main job: build softrdma and show it at work.
#  1. Debian's unmodified ibv_devinfo and ibv_rc_pingpong run on softrdma's
#     libibverbs.so.1 (no RDMA NIC, no kernel module): two processes talk
#     RoCEv2 over loopback, data validated.
#  2. srccl runs an all-reduce across local ranks, through its own
#     one-host shared memory and then over softrdma's RC QPs, and prints
#     the nccl-tests-style tables.
#  3. The wire codec writes one packet of every opcode to a capture that
#     tshark decodes as InfiniBand.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
export LD_LIBRARY_PATH=$PWD/build/lib

echo "== ibv_devinfo (Debian's binary, softrdma's library) =="
ibv_devinfo
echo
echo "== ibv_rc_pingpong -g 0 -c -s 65536 -n 200: server and client processes =="
port=$((18515 + RANDOM % 1000))
ibv_rc_pingpong -p "$port" -g 0 -c -s 65536 -n 200 > build/demo-server.txt 2>&1 &
srv=$!
for _ in $(seq 100); do
  ss -Hltn "sport = :$port" | grep -q . && break
  sleep 0.1
done
ibv_rc_pingpong -p "$port" -g 0 -c -s 65536 -n 200 127.0.0.1
wait "$srv"
echo "-- server side:"
cat build/demo-server.txt
echo
echo "== srccl: all-reduce across 4 local ranks, through srccl's one-host shared memory (nccl-tests columns, results checked) =="
build/bin/srccl-run -n 4 build/bin/srccl-perf -b 8 -e 4M -f 8 -o allreduce -c 1 -n 10 -w 2
echo "== srccl: the same over softrdma's RC QPs (SRCCL_SHM=0) =="
SRCCL_SHM=0 build/bin/srccl-run -n 4 build/bin/srccl-perf -b 8 -e 4M -f 8 -o allreduce -c 1 -n 10 -w 2
echo
out=build/softrdma-sample.pcap
echo "== srdma-wire --sample-pcap $out: one RoCEv2 packet per opcode, as tshark sees them =="
build/bin/srdma-wire --sample-pcap "$out" >/dev/null
# (payload heuristics such as RPC-over-RDMA would misread the sample bytes)
tshark -r "$out" -n --disable-protocol rpcordma --disable-protocol smb_direct \
  --disable-protocol iser --disable-protocol nvme-rdma --disable-protocol lnet \
  --disable-protocol smc --disable-protocol infiniband_sdp -T fields -E header=y -E separator=/t \
  -e frame.number -e ip.dst -e udp.dstport -e infiniband.bth.opcode -e infiniband.bth.destqp \
  -e infiniband.bth.psn -e infiniband.invariant.crc 2>/dev/null
