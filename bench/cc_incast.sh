#!/usr/bin/env bash
# bench/cc_incast.sh: incast with the real engine in the fabric simulator,
# as time series, to compare with the DCQCN paper (Zhu et al., SIGCOMM
# 2015): is the queue held between Kmin and Kmax, are the shares fair, is
# the oscillation bounded (docs/CONGESTION.md, "Incast in the fabric
# simulator").
#
# N senders (CCI_SENDERS, 16 32 64 128 256) and one receiver on one switch
# (a star: srdma-fabric --leaves 1 --hosts-per-leaf N+1), every link 100
# Gbit/s with 2.5 us of propagation, so every sender has the same base RTT
# of 10 us (plus 1.3 us of serialization). One long RDMA WRITE per sender
# (long-lived flows), all starting at 0, header-only mode, selective
# recovery on (--sack). The receiver's port: a 2 MiB buffer and the DCQCN
# paper's RED profile scaled from 40 to 100 Gbit/s by the line rate (Kmin
# 5 KB -> 12.5 KB, Kmax 200 KB -> 500 KB, Pmax 1% unchanged). For each cc
# of CCI_CCS (none dcqcn nscc, at the engines' defaults) and each N: the
# port's queue every CCI_SAMPLE us, and every flow's delivered rate.
#
# Output in CCI_OUT (build/bench-cc-incast): per run the queue and host
# CSVs and the srdma-fabric summary; cc-incast.csv and cc-incast.md (the
# table, over the steady state: the last two thirds of the run); one PNG
# per cc (cc-incast-<cc>.png: queue and per-flow rates over time, one row
# per N). The simulation is deterministic: one run per point; only wall
# time varies.
#
# Environment:
#   CCI_BIN      srdma-fabric (build/bin/srdma-fabric)
#   CCI_OUT      output directory (build/bench-cc-incast)
#   CCI_SENDERS  sender counts ("16 32 64 128 256")
#   CCI_CCS      controllers ("none dcqcn nscc"), each as --cc takes it
#                (parameters allowed: "dcqcn,rai_mbps=50")
#   CCI_MS       simulated milliseconds per run (30)
#   CCI_SAMPLE   sampling interval in us (10)
#   CCI_BUFFER CCI_KMIN CCI_KMAX CCI_PMAX   the port (2M, 12500, 500000, 0.01)
#   CCI_EXTRA    more srdma-fabric flags for every run
#   CCI_LABEL    a name for these runs in the outputs (default)
#   CCI_REUSE    1: keep the runs already in CCI_OUT (same label), redo only
#                the table and plots
set -u
bin=${CCI_BIN:-build/bin/srdma-fabric}
out=${CCI_OUT:-build/bench-cc-incast}
senders=${CCI_SENDERS:-"16 32 64 128 256"}
ccs=${CCI_CCS:-"none dcqcn nscc"}
ms=${CCI_MS:-30}
sample=${CCI_SAMPLE:-10}
buffer=${CCI_BUFFER:-2M}
kmin=${CCI_KMIN:-12500}
kmax=${CCI_KMAX:-500000}
pmax=${CCI_PMAX:-0.01}
label=${CCI_LABEL:-default}
read -r -a extra <<<"${CCI_EXTRA:-}"
[ -x "$bin" ] || { echo "cc_incast: no $bin (build first)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "cc_incast: needs python3" >&2; exit 2; }
if ! command -v gnuplot >/dev/null; then
  apt-get install -y gnuplot-nox >/dev/null 2>&1 || echo "cc_incast: no gnuplot, no PNGs" >&2
fi
mkdir -p "$out"
tobytes() { numfmt --from=iec "$1"; }
kmin_b=$(tobytes "$kmin") kmax_b=$(tobytes "$kmax") buffer_b=$(tobytes "$buffer")

runs=()
for cc in $ccs; do
  for n in $senders; do
    tag=$(printf '%s-%s-n%s' "$label" "${cc//[,=]/_}" "$n")
    cmd=("$bin" --leaves 1 --spines 1 --hosts-per-leaf $((n + 1)) --host-delay 2500
         --buffer "$buffer" --kmin "$kmin" --kmax "$kmax" --pmax "$pmax"
         --workload incast --incast-n "$n" --size 1G --mode header --sack --cc "$cc"
         --until "$ms" --sample "$sample" --queue-csv "$out/$tag-queue.csv"
         --hosts-csv "$out/$tag-hosts.csv" "${extra[@]}")
    if [ "${CCI_REUSE:-0}" = 1 ] && grep -q '^digest' "$out/$tag.txt" 2>/dev/null; then
      runs+=("$tag|$cc|$n") # deterministic: the same flags gave these files
      continue
    fi
    echo "# ${cmd[*]}" >"$out/$tag.txt"
    # exit status 1: the flows are long-lived and do not complete by --until
    "${cmd[@]}" >>"$out/$tag.txt" 2>/dev/null
    grep -q '^digest' "$out/$tag.txt" || { echo "cc_incast: $tag failed" >&2; exit 1; }
    runs+=("$tag|$cc|$n")
    echo "$tag done" >&2
  done
done

CCI_RUNS="$(printf '%s\n' "${runs[@]}")" python3 - "$out" "$label" "$ms" "$sample" "$kmin_b" "$kmax_b" \
  "$buffer_b" <<'EOF'
import csv, math, sys
out, label, ms, sample, kmin, kmax, buf = sys.argv[1], sys.argv[2], float(sys.argv[3]), \
    float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
LINE = 100e9
t0 = ms * 1000 / 3  # steady state: the last two thirds (us)

def pct(v, p):  # nearest rank
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)] if v else 0

def summary_field(txt, key):
    for line in open(txt):
        if line.startswith(key):
            return line.split()[len(key.split())]
    return "0"

rows = []
import os
for spec in os.environ["CCI_RUNS"].splitlines():
    tag, cc, n = spec.split("|")
    n = int(n)
    q = list(csv.DictReader(open(f"{out}/{tag}-queue.csv")))
    steady = [r for r in q if float(r["t_us"]) >= t0 and float(r["t_us"]) < ms * 1000]
    qs = sorted(int(r["q_bytes"]) for r in steady)
    qmax_all = max(int(r["max_q_bytes"]) for r in q)
    qmax_st = max(int(r["max_q_bytes"]) for r in steady)
    drops_all = sum(int(r["drops"]) for r in q)
    drops_st = sum(int(r["drops"]) for r in steady)
    band = sum(kmin <= v <= kmax for v in qs) / len(qs)
    mean = sum(qs) / len(qs)
    std = math.sqrt(sum((v - mean) ** 2 for v in qs) / len(qs))
    flow, sent, bins = {}, 0, {}
    for r in csv.DictReader(open(f"{out}/{tag}-hosts.csv")):
        t = float(r["t_us"])
        b = int(r["delivered_bytes"])
        h = int(r["host"])
        # per-flow rate in 100 us bins, for the plot
        k = int(t // 100)
        bins.setdefault(h, {})
        bins[h][k] = bins[h].get(k, 0) + b
        if t0 <= t < ms * 1000:
            flow[h] = flow.get(h, 0) + b
            sent += int(r["sent_bytes"])
    v = [flow.get(h, 0) for h in sorted(bins)]
    span = (ms * 1000 - t0) * 1e-6
    util = sum(v) * 8 / span / LINE
    jain = sum(v) ** 2 / (len(v) * sum(x * x for x in v)) if any(v) else 0
    retx = summary_field(f"{out}/{tag}.txt", "retransmissions")
    rows.append(dict(label=label, cc=cc, senders=n, q_p50=pct(qs, 50), q_p99=pct(qs, 99),
                     q_max_steady=qmax_st, q_max_run=qmax_all, in_band=round(band, 3),
                     q_p5_p95=pct(qs, 95) - pct(qs, 5), q_std=round(std), drops_run=drops_all,
                     drops_steady=drops_st, util=round(util, 3), jain=round(jain, 3),
                     offered=round(sent * 8 / span / LINE, 3), resends=retx))
    # plot data: time, queue KB; and time, the first 8 flows' Gbit/s, the fair share
    with open(f"{out}/{tag}-plot-q.dat", "w") as o:
        for r in q:
            o.write(f"{float(r['t_us']) / 1000:.3f} {int(r['q_bytes']) / 1000:.1f}\n")
    with open(f"{out}/{tag}-plot-r.dat", "w") as o:
        hosts = sorted(bins)[:8]
        for k in range(int(ms * 10)):
            vals = " ".join(f"{bins[h].get(k, 0) * 8 / 100e-6 / 1e9:.3f}" for h in hosts)
            o.write(f"{k / 10 + 0.05:.3f} {vals} {LINE / n / 1e9:.3f}\n")

cols = list(rows[0].keys())
with open(f"{out}/cc-incast.csv", "a" if label != "default" else "w") as o:
    w = csv.DictWriter(o, fieldnames=cols)
    if label == "default" or o.tell() == 0:
        w.writeheader()
    w.writerows(rows)
with open(f"{out}/cc-incast-{label}.md", "w") as o:
    o.write(f"Steady state: {t0 / 1000:.0f} to {ms:.0f} ms; Kmin {kmin / 1000:g} KB, "
            f"Kmax {kmax / 1000:g} KB, buffer {buf / 1024:g} KiB; queue in KB.\n\n")
    o.write("| cc | N | queue p50 | p99 | max (steady / run) | in [Kmin, Kmax] | p5-p95 band "
            "| drops (steady / run) | goodput / line | Jain | offered / line | resends |\n")
    o.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        o.write(f"| {r['cc']} | {r['senders']} | {r['q_p50'] / 1000:.0f} | {r['q_p99'] / 1000:.0f} "
                f"| {r['q_max_steady'] / 1000:.0f} / {r['q_max_run'] / 1000:.0f} "
                f"| {r['in_band'] * 100:.0f}% | {r['q_p5_p95'] / 1000:.0f} "
                f"| {r['drops_steady']} / {r['drops_run']} | {r['util']:.3f} | {r['jain']:.3f} "
                f"| {r['offered']:.2f} | {r['resends']} |\n")
print(open(f"{out}/cc-incast-{label}.md").read())
EOF

command -v gnuplot >/dev/null || exit 0
for cc in $ccs; do
  c=${cc//[,=]/_}
  set -- $senders
  rowsn=$#
  {
    echo "set terminal png size 1100,$((190 * rowsn + 30)) font ',8'"
    echo "set output '$out/cc-incast-$label-$c.png'"
    echo "set multiplot layout $rowsn,2 title '$cc: port queue (left) and per-flow delivered rate, 100 us bins, first 8 flows (right)'"
    echo "set grid; set xrange [0:$ms]; set key top right"
    for n in $senders; do
      tag=$label-$c-n$n
      echo "set title 'N = $n'; set ylabel 'queue (KB)'; set xlabel 'time (ms)'; set yrange [0:$((buffer_b / 1000 + 100))]"
      echo "plot '$out/$tag-plot-q.dat' using 1:2 with lines lw 1 title 'queue', $((kmin_b / 1000)) with lines dt 2 lc rgb 'dark-green' title 'Kmin', $((kmax_b / 1000)) with lines dt 2 lc rgb 'red' title 'Kmax'"
      echo "set ylabel 'Gbit/s'; set yrange [0:*]"
      echo "plot for [i=2:9] '$out/$tag-plot-r.dat' using 1:i with lines lw 1 notitle, '$out/$tag-plot-r.dat' using 1:10 with lines lw 2 dt 2 lc rgb 'black' title 'fair share'"
    done
    echo "unset multiplot"
  } | gnuplot 2>&1 | grep -v "^$" >&2 || true
done
ls "$out"/cc-incast-"$label"-*.png 2>/dev/null
