#!/usr/bin/env python3
"""bench/cc_converge.py: convergence times from srdma-switch's stats CSV.

Usage: cc_converge.py STATS_CSV RATE_MBPS CC OUT_SERIES_CSV
Ports 0 and 1 are senders A and B, the last port the receiver. Each
sender's rate over an interval is what it sent into the switch (its
port's rx_bytes; with no drops that is its goodput plus the few bytes of
connection setup). B's join is its first interval above 5% of the
bottleneck, its leave the end of its last one. Convergence after the join:
the time until both senders are within 10% of half the aggregate of the
interval, for three intervals in a row. After the leave: the time until A
alone carries at least 90% of the aggregate the two had together (their
median over the shared time), three intervals in a row. Prints one CSV
line: cc,join_s,leave_s,converge_join_s,converge_leave_s,shared_agg_mbps,
shared_jain; "nan" where a time was not reached.
"""
import csv
import statistics
import sys

HOLD = 3


def main():
    path, rate_mbps, cc, series = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    rows = {}
    ports = set()
    with open(path) as f:
        for r in csv.DictReader(f):
            t = float(r["t"])
            p = int(r["port"])
            ports.add(p)
            rows.setdefault(t, {})[p] = r
    rx = max(ports)
    times = sorted(t for t in rows if len(rows[t]) == len(ports))
    pts = []  # (t_end, rate_a, rate_b, queue) in Mb/s, bytes
    for a, b in zip(times, times[1:]):
        dt = b - a
        if dt <= 0:
            continue
        ra = (int(rows[b][0]["rx_bytes"]) - int(rows[a][0]["rx_bytes"])) * 8 / dt / 1e6
        rb = (int(rows[b][1]["rx_bytes"]) - int(rows[a][1]["rx_bytes"])) * 8 / dt / 1e6
        pts.append((b, ra, rb, int(rows[b][rx]["q_bytes"])))
    with open(series, "w") as f:
        f.write("t,a_mbps,b_mbps,queue_bytes\n")
        for p in pts:
            f.write("%.3f,%.2f,%.2f,%d\n" % p)
    on = [i for i, p in enumerate(pts) if p[2] > 0.05 * rate_mbps]
    nan = float("nan")
    if not on:
        print("%s,nan,nan,nan,nan,nan,nan" % cc)
        return
    j, l = on[0], on[-1]
    join_t = pts[j][0] - (pts[j][0] - pts[j - 1][0] if j else 0)
    leave_t = pts[l][0]

    def first_hold(idx, ok):
        run = 0
        for i in idx:
            run = run + 1 if ok(pts[i]) else 0
            if run == HOLD:
                return pts[i - HOLD + 1][0]
        return None

    def fair(p):
        half = (p[1] + p[2]) / 2
        return half > 0 and abs(p[1] - half) <= 0.1 * half and abs(p[2] - half) <= 0.1 * half

    cj = first_hold(range(j, l + 1), fair)
    shared = [pts[i] for i in range(j, l + 1)]
    agg = statistics.median(p[1] + p[2] for p in shared)
    jain = statistics.median(
        (p[1] + p[2]) ** 2 / (2 * (p[1] ** 2 + p[2] ** 2)) if p[1] + p[2] > 0 else 0 for p in shared
    )
    cl = first_hold(range(l + 1, len(pts)), lambda p: p[1] >= 0.9 * agg)
    print(
        "%s,%.3f,%.3f,%s,%s,%.1f,%.3f"
        % (
            cc,
            join_t,
            leave_t,
            "%.3f" % (cj - join_t) if cj is not None else nan,
            "%.3f" % (cl - leave_t) if cl is not None else nan,
            agg,
            jain,
        )
    )


if __name__ == "__main__":
    main()
