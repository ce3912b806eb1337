#!/usr/bin/env bash
# bench/cc_ab.sh: the cost of congestion control where there is no
# congestion. Unmodified perftest over softrdma's UDP path on loopback
# (SOFTRDMA_SHM=0), one build, SOFTRDMA_CC=none against dcqcn and nscc
# (CC_SETTINGS): ib_write_bw at 4 KiB and 64 KiB (Gb/s), ib_write_bw 64 B
# (Mpps) and ib_write_lat 2 B (typical us). The settings run interleaved, round
# by round (order rotating), so drifts in machine load hit them alike. The
# report gives each point's median, min and max per setting and the
# median's ratio to none's; "same" when the ranges overlap.
# A benchmark, not a test.
#
# Environment:
#   CC_SETTINGS the SOFTRDMA_CC values, none first ("none dcqcn nscc"; a
#              value may carry parameters, e.g. "none nscc nscc,pace=0")
#   CC_ROUNDS  rounds (5)
#   CC_SECS    perftest -D per bandwidth point (2)
#   CC_SHM     1: the same-host shared-memory path instead of UDP (0)
#   CC_BUILD   build directory with lib/libibverbs.so.1 (build)
#   CC_OUT     report (bench/results/cc_ab-<UTC timestamp>.txt)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${CC_ROUNDS:-5}
secs=${CC_SECS:-2}
lib=${CC_BUILD:-$root/build}/lib
[ -e "$lib/libibverbs.so.1" ] || { echo "cc_ab: no $lib/libibverbs.so.1 (build first)" >&2; exit 2; }
command -v ib_write_bw >/dev/null || { echo "cc_ab: perftest is not installed" >&2; exit 2; }
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${CC_OUT:-$root/bench/results/cc_ab-$stamp.txt}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
# shellcheck source=ab_lib.sh
. "$root/bench/ab_lib.sh"
trap ab_cleanup EXIT
port=$((22000 + $$ % 2000))
read -r -a settings <<<"${CC_SETTINGS:-none dcqcn nscc}"
[ "${settings[0]}" = none ] || { echo "cc_ab: CC_SETTINGS must start with none (the peer)" >&2; exit 2; }
nset=${#settings[@]}

# run CC TAG PROG ARGS...: one perftest pair; its client's output in $tmp/TAG
run() {
  local cc=$1 tag=$2
  shift 2
  local env="LD_LIBRARY_PATH=$lib SOFTRDMA_SHM=${CC_SHM:-0} SOFTRDMA_CC=$cc"
  ab_pair "$tmp/$tag" 60 "$env" "$env" "$@" -F -x 0 || return 1
}

raw=$tmp/raw
: >"$raw"
for ((r = 1; r <= rounds; r++)); do
  for ((k = 0; k < nset; k++)); do
    cc=${settings[$(((r + k) % nset))]}
    echo "cc_ab: round $r/$rounds: $cc" >&2
    for s in 4096 65536; do
      if run "$cc" bw "ib_write_bw" -s $s -D "$secs" --report_gbits; then
        awk -v c="$cc" -v s=$s '/#bytes/ { getline; print "write_bw_" s "_gbps", c, $4; exit }' \
          "$tmp/bw.cli" >>"$raw"
      fi
    done
    if run "$cc" bw "ib_write_bw" -s 64 -D "$secs" --report_gbits; then
      awk -v c="$cc" '/#bytes/ { getline; print "write_bw_64_mpps", c, $5; exit }' "$tmp/bw.cli" >>"$raw"
    fi
    if run "$cc" lat "ib_write_lat" -s 2 -n 5000; then
      awk -v c="$cc" '/#bytes/ { getline; print "write_lat_2_us", c, $5; exit }' "$tmp/lat.cli" >>"$raw"
    fi
  done
done

{
  echo "# bench/cc_ab.sh: $rounds interleaved rounds, perftest over $([ "${CC_SHM:-0}" = 1 ] && echo "shared memory" || echo "UDP on loopback"), -D $secs"
  echo "# commit $(git -C "$root" rev-parse --short HEAD), $(date -u), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
  echo "# point | setting | median | min | max | median / none's | ranges"
  python3 - "$raw" "${settings[@]}" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    k, c, v = line.split()
    rows.setdefault(k, {}).setdefault(c, []).append(float(v))
for k in sorted(rows):
    base = rows[k].get("none")
    for c in sys.argv[2:]:
        v = rows[k].get(c)
        if not v:
            continue
        m = statistics.median(v)
        ratio = "%.3f" % (m / statistics.median(base)) if base else "-"
        same = "-"
        if base and c != "none":
            same = "same" if min(v) <= max(base) and min(base) <= max(v) else "differ"
        print("%s | %s | %.3f | %.3f | %.3f | %s | %s (n=%d)" % (k, c, m, min(v), max(v), ratio, same, len(v)))
PY
  echo "# raw: point setting value"
  cat "$raw"
} | tee "$out"
echo "cc_ab: report in $out" >&2
