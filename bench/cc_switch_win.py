#!/usr/bin/env python3
"""bench/cc_switch_win.py: the figures of one bench/cc_switch.sh run over
the time every sender was running, from srdma-switch's stats CSV.

Usage: cc_switch_win.py STATS_CSV NSENDERS RATE_MBPS
Ports 0..NSENDERS-1 are the senders, the last port the receiver. Each
perftest measures its own -D seconds from its own start, and on a loaded
host the senders start hundreds of milliseconds apart, so their averages
cover different times (a sender alone at the start reports more than its
share). Here the window runs from the interval in which the last sender
started (put more than 1% of the bottleneck into the switch) to the one
in which the first sender ended, less those two (partial ones). Over it: the receiver port's egress rate (Ethernet frames
out, so headers and any resend included), each sender's ingress rate and
Jain's index over those. Prints one CSV line: window_s,egress_mbps,jain;
"0,0,0" when no interval had every sender running.
"""
import csv
import sys


def main():
    path, n, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rows = {}
    ports = set()
    with open(path) as f:
        for r in csv.DictReader(f):
            t = float(r["t"])
            p = int(r["port"])
            ports.add(p)
            rows.setdefault(t, {})[p] = r
    if not ports:
        print("0,0,0")
        return
    rx = max(ports)
    times = sorted(t for t in rows if len(rows[t]) == len(ports))
    # per sender, its first and last interval above 1% of the bottleneck:
    # the window runs from the last sender's start to the first sender's
    # end (a sender a loaded host stalls for an interval stays counted)
    iv = [(a, b) for a, b in zip(times, times[1:]) if b > a]

    def active(i, a, b):
        return (int(rows[b][i]["rx_bytes"]) - int(rows[a][i]["rx_bytes"])) * 8 / (b - a) / 1e6 > 0.01 * rate

    starts, ends = [], []
    for i in range(n):
        on = [k for k, (a, b) in enumerate(iv) if active(i, a, b)]
        if not on:
            print("0,0,0")
            return
        starts.append(on[0])
        ends.append(on[-1])
    # less the partial first and last intervals
    best = iv[max(starts) + 1 : min(ends)]
    if not best:
        print("0,0,0")
        return
    a, b = best[0][0], best[-1][1]
    dt = b - a
    eg = (int(rows[b][rx]["tx_bytes"]) - int(rows[a][rx]["tx_bytes"])) * 8 / dt / 1e6
    rs = [(int(rows[b][i]["rx_bytes"]) - int(rows[a][i]["rx_bytes"])) * 8 / dt / 1e6 for i in range(n)]
    s, s2 = sum(rs), sum(r * r for r in rs)
    jain = s * s / (n * s2) if s2 > 0 else 0
    print("%.1f,%.1f,%.3f" % (dt, eg, jain))


if __name__ == "__main__":
    main()
