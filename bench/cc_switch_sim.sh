#!/usr/bin/env bash
# bench/cc_switch_sim.sh: bench/cc_switch.sh's bottleneck in the fabric
# simulator (the real engine and src/cc, deterministic): N senders into
# one receiver on one switch (srdma-fabric --leaves 1), every link RATE
# with 40 us of propagation (a base round trip of 160 us plus
# serialization, as ib_write_lat measures through srdma-switch on a quiet
# host), the receiver's port with cc_switch.sh's buffer and RED profile
# (Kmin = BUFFER/8, Kmax = BUFFER*3/4, Pmax 0.2), a 4 KiB path MTU, the
# engine's 2048-packet window, transport timeout 14 (perftest's), one
# long WRITE per sender, and DCQCN's parameters derived as cc_switch.sh
# derives them (ccs_dcqcn_params in bench/cc_switch_lib.sh) from that
# round trip.
#
# The hosts: what separates the simulator from srdma-switch between
# namespaces is the hosts' scheduling (2 cores under 2N perftest
# processes, their NIC threads and the switch). Each host model is run:
#   quiet      the links only;
#   rev:D/H    the receiver's ACKs and CNPs D us late on the wire and
#              released at multiples of H us (srdma-fabric --link-delay
#              h<N>:leaf0=D/H): a late receiver, feedback delay alone;
#   all:H      every host's packets released at multiples of H us: hosts
#              that all run only every H us (a saturated machine whose
#              perftests and NIC threads take turns), in both directions.
# Per run, over the steady state (after CCSS_SKIP ms): the receiver's
# delivered rate over RATE, Jain's index over the senders' delivered
# rates, the port's queue p99 over Kmax and the share of samples with it
# empty, drops at the port, the engines' transport timeouts and
# tail-loss probes, and issue #23's targets met (Y) or not (n): goodput >=
# 0.9 x bottleneck, Jain >= 0.95, queue p99 <= Kmax, 0 drops. A benchmark,
# not a test; about a second per run.
#
# Environment:
#   CCSS_BIN      srdma-fabric (build/bin/srdma-fabric)
#   CCSS_RATE     link rate in Gb/s (1)
#   CCSS_BUFFER   port buffer in bytes (1048576)
#   CCSS_SENDERS  ("1 2 4 8")
#   CCSS_HOSTS    host models ("quiet rev:1040/2000 all:1000 all:2000")
#   CCSS_CCS      ("none dcqcn")
#   CCSS_DCQCN    dcqcn parameters; "auto" (the default): derived
#   CCSS_MS       simulated ms per run (600); CCSS_SKIP ms left out (100)
#   CCSS_PMAX     the port's RED Pmax (0.2, cc_switch.sh's)
#   CCSS_OUT      output directory (build/bench-cc-switch-sim)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/cc_switch_lib.sh"
bin=${CCSS_BIN:-$root/build/bin/srdma-fabric}
rate=${CCSS_RATE:-1}
buf=${CCSS_BUFFER:-1048576}
senders=${CCSS_SENDERS:-"1 2 4 8"}
hosts=${CCSS_HOSTS:-"quiet rev:1040/2000 all:1000 all:2000"}
ccs=${CCSS_CCS:-"none dcqcn"}
ms=${CCSS_MS:-600}
skip=${CCSS_SKIP:-100}
pmax=${CCSS_PMAX:-0.2}
out=${CCSS_OUT:-$root/build/bench-cc-switch-sim}
[ -x "$bin" ] || { echo "cc_switch_sim: no $bin (build first)" >&2; exit 2; }
mkdir -p "$out"
kmin=$((buf / 8)) kmax=$((buf * 3 / 4))
rate_mbps=$(awk -v r="$rate" 'BEGIN { print int(r * 1000) }')
rtt_us=160
wrtt_us=$(ccs_window_rtt_us "$rate_mbps" "$buf")
dcqcn=${CCSS_DCQCN:-auto}
if [ "$dcqcn" = auto ]; then
  dcqcn=$(ccs_dcqcn_params "$rtt_us" "$wrtt_us" "$rate_mbps")
  ccs_dcqcn_explain "$rtt_us" "$wrtt_us" "$rate_mbps" "$buf B"
fi
csv=$out/cc_switch_sim.csv
echo "senders,hosts,cc,goodput_over_bottleneck,jain,qp99_over_kmax,q_empty,drops,timeouts,probes,met" >"$csv"
for n in $senders; do
  for hm in $hosts; do
    ld=()
    case $hm in
    quiet) ;;
    rev:*) ld=(--link-delay "h$n:leaf0=${hm#rev:}") ;;
    all:*) for ((i = 0; i <= n; i++)); do ld+=(--link-delay "h$i:leaf0=40/${hm#all:}"); done ;;
    *) echo "cc_switch_sim: unknown host model '$hm'" >&2; exit 2 ;;
    esac
    for cc in $ccs; do
      spec=none
      [ "$cc" = dcqcn ] && spec="dcqcn,line_rate_mbps=$rate_mbps,$dcqcn"
      tag="n$n-${hm//[:\/]/_}-$cc"
      # exit status 1: the flows are long-lived and do not complete
      "$bin" --leaves 1 --spines 1 --hosts-per-leaf $((n + 1)) --host-rate "$rate" --host-delay 40000 \
        --buffer "$buf" --kmin $kmin --kmax $kmax --pmax "$pmax" --workload incast --incast-n "$n" \
        --incast-dst "$n" --size 1G --mode header --sack --mtu 4096 --window 2048 --timeout 14 \
        --cc "$spec" --until "$ms" --sample 1000 --queue-csv "$out/$tag-queue.csv" \
        --hosts-csv "$out/$tag-hosts.csv" "${ld[@]}" >"$out/$tag.txt" 2>/dev/null
      grep -q '^digest' "$out/$tag.txt" || { echo "cc_switch_sim: $tag failed" >&2; exit 1; }
      python3 - "$out/$tag" "$n" "$hm" "$cc" "$rate" "$kmax" "$skip" <<'PY' >>"$csv"
import csv, re, sys
tag, n, hm, cc, rate, kmax, skip = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
t0 = skip * 1000
per = {}
for r in csv.DictReader(open(tag + "-hosts.csv")):
    if float(r["t_us"]) >= t0:
        per.setdefault(int(r["host"]), []).append(float(r["delivered_gbps"]))
rates = [sum(v) / len(v) for v in per.values()] + [0.0] * (n - len(per))
s, s2 = sum(rates), sum(x * x for x in rates)
jain = s * s / (n * s2) if s2 else 0
qs = sorted(int(r["q_bytes"]) for r in csv.DictReader(open(tag + "-queue.csv")) if float(r["t_us"]) >= t0)
p99 = qs[min(len(qs) - 1, int(len(qs) * 0.99))] / kmax
empty = sum(1 for q in qs if q == 0) / len(qs)
txt = open(tag + ".txt").read()
drops = int(re.search(r"^drops\s+(\d+)", txt, re.M).group(1))
m = re.search(r"timeouts (\d+), tail-loss probes (\d+)", txt)
g = s / rate
met = ("Y" if g >= 0.9 else "n") + ("Y" if jain >= 0.95 else "n") + ("Y" if p99 <= 1 else "n") + ("Y" if drops == 0 else "n")
print("%d,%s,%s,%.3f,%.3f,%.2f,%.2f,%d,%s,%s,%s" % (n, hm, cc, g, jain, p99, empty, drops, m.group(1), m.group(2), met))
PY
      tail -1 "$csv" >&2
    done
  done
done
echo "# bench/cc_switch_sim.sh: $rate Gb/s, buffer $buf B (Kmin $kmin, Kmax $kmax), RTT $rtt_us us, $ms ms simulated (first $skip left out)"
echo "# dcqcn: $dcqcn"
column -s, -t "$csv"
echo "csv: $csv"
