#!/usr/bin/env bash
# bench/cc_window_ab.sh: what DCQCN's window costs where there is no
# congestion. Unmodified ib_write_bw over softrdma's UDP path on loopback
# (SOFTRDMA_SHM=0), 4 KiB and 64 KiB WRITEs, for each SOFTRDMA_CC value in
# CCW_SETTINGS (by default none, DCQCN as it ships, without a window, and
# DCQCN with its window, bdp_mult=2), interleaved round by round with the order
# rotating. Prints each point's median [min, max] per setting and the
# ratio of its median to the first setting's. A benchmark, not a test.
#
# Environment: CCW_ROUNDS (5), CCW_SECS (perftest -D, 2), CCW_BUILD (build),
# CCW_SETTINGS (space-separated SOFTRDMA_CC values).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${CCW_ROUNDS:-5}
secs=${CCW_SECS:-2}
lib=${CCW_BUILD:-$root/build}/lib
read -r -a settings <<<"${CCW_SETTINGS:-none dcqcn dcqcn,bdp_mult=2}"
[ -e "$lib/libibverbs.so.1" ] || { echo "cc_window_ab: build first" >&2; exit 2; }
tmp=$(mktemp -d)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
trap ab_cleanup EXIT
port=$((21000 + $$ % 1000))
raw=$tmp/raw
: >"$raw"
n=${#settings[@]}
for ((r = 1; r <= rounds; r++)); do
  for ((k = 0; k < n; k++)); do
    cc=${settings[$(((r + k) % n))]}
    for s in 4096 65536; do
      env="LD_LIBRARY_PATH=$lib SOFTRDMA_SHM=0 SOFTRDMA_CC=$cc"
      if ab_pair "$tmp/out" 60 "$env" "$env" ib_write_bw -F -x 0 -s $s -D "$secs" --report_gbits ||
        [ "$ab_crc" -eq 0 ]; then
        awk -v c="$cc" -v s=$s '/#bytes/ { getline; print "write_bw_" s "_gbps", c, $4; exit }' \
          "$tmp/out.cli" >>"$raw"
      fi
    done
  done
done
echo "# bench/cc_window_ab.sh: $rounds interleaved rounds, ib_write_bw over UDP on loopback, -D $secs"
echo "# commit $(git -C "$root" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
python3 - "$raw" "${settings[@]}" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    k, c, v = line.split()
    rows.setdefault(k, {}).setdefault(c, []).append(float(v))
order = sys.argv[2:]
for k in sorted(rows):
    base = rows[k].get(order[0])
    for c in order:
        v = rows[k].get(c)
        if not v:
            continue
        m = statistics.median(v)
        ratio = "%.2f" % (m / statistics.median(base)) if base else "-"
        print("%s | %s | %.3f [%.3f, %.3f] | %s (n=%d)" % (k, c, m, min(v), max(v), ratio, len(v)))
PY
