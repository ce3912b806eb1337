#!/usr/bin/env bash
# bench/multipath.sh: one RC QP between two network namespaces joined by
# two veth links with an L4-hashed multipath route (tests/netns/
# multipath_lib.sh), single path against spraying over 16 UDP source
# ports (SOFTRDMA_PATH_REORDER=1: the go-back-N responder takes whatever
# order arrives): spray per packet, spray in runs of 16 packets per port
# (SOFTRDMA_PATH_BURST=16, which keeps UDP GSO trains) and adaptive. Per
# point: the WRITE phase's
# goodput of a verified mp_xfer transfer (every byte checked, so a point
# that corrupts data fails), its ratio to single path in the same
# repetition, the packets retransmitted and sequence NAKs received, and the
# share of A's bytes on the first link. Repetitions are interleaved (rep 1
# of every point, then rep 2, ...); the table shows medians and
# [min..max]. A benchmark, not a test: never part of ctest. Root only.
#
#   bench/multipath.sh
# Environment:
#   MP_REPS   repetitions (5)
#   MP_MIB    MiB per transfer (64)
#   MP_BUILD  build directory (build)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MP_BUILD:-$root/build}
reps=${MP_REPS:-5} mib=${MP_MIB:-64}
xfer=$build/bin/mp_xfer lib=$build/lib
[ -x "$xfer" ] || { echo "no $xfer: build first" >&2; exit 1; }
. "$root/tests/netns/multipath_lib.sh"
mp_up || { echo "topology failed" >&2; exit 1; }

points=(single spray spray16 adaptive)
env_of() {
    case $1 in
    single) echo SOFTRDMA_PATHS=1 ;;
    spray) echo SOFTRDMA_PATHS=16 SOFTRDMA_PATH_POLICY=spray SOFTRDMA_PATH_REORDER=1 ;;
    spray16) echo SOFTRDMA_PATHS=16 SOFTRDMA_PATH_POLICY=spray SOFTRDMA_PATH_BURST=16 SOFTRDMA_PATH_REORDER=1 ;;
    adaptive) echo SOFTRDMA_PATHS=16 SOFTRDMA_PATH_POLICY=adaptive SOFTRDMA_PATH_REORDER=1 ;;
    esac
}
stat_sum() { # FIELD FILE: the field summed over both sides' stats lines
    grep -o " $1=[0-9]*" "$2" | awk -F= '{s += $2} END {print s + 0}'
}
declare -A mbs rtx naks share
for r in $(seq "$reps"); do
    for p in "${points[@]}"; do
        # shellcheck disable=SC2046
        if ! mp_xfer_run "$xfer" "$lib" "$tmp/out" "$mib" $(env_of "$p"); then
            echo "rep $r $p: FAILED"; cat "$tmp/out"; continue
        fi
        mbs[$p,$r]=$(sed -n 's/.*ms (\([0-9.]*\) MB\/s).*/\1/p' "$tmp/out")
        rtx[$p,$r]=$(stat_sum retransmits "$tmp/out")
        naks[$p,$r]=$(stat_sum seq_naks "$tmp/out")
        share[$p,$r]=$((100 * mp_d0 / (mp_d0 + mp_d1)))
    done
done
med() { # values...: "median [min..max]"
    printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
        if (!NR) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3g [%.3g..%.3g]", m, v[1], v[NR] }'
}
echo "one RC QP, $mib MiB WRITEs then READs back, 256 KiB messages, MTU 1024, $reps interleaved reps"
printf '%-9s %-26s %-24s %-22s %-18s %s\n' point "write MB/s" "ratio to single" retransmits seq_naks "% bytes on mpa0"
for p in "${points[@]}"; do
    a=() b=() c=() d=() e=()
    for r in $(seq "$reps"); do
        [ -n "${mbs[$p,$r]:-}" ] || continue
        a+=("${mbs[$p,$r]}") c+=("${rtx[$p,$r]}") d+=("${naks[$p,$r]}") e+=("${share[$p,$r]}")
        [ -n "${mbs[single,$r]:-}" ] && b+=("$(awk -v x="${mbs[$p,$r]}" -v y="${mbs[single,$r]}" 'BEGIN {print x / y}')")
    done
    printf '%-9s %-26s %-24s %-22s %-18s %s\n' "$p" "$(med "${a[@]}")" "$(med "${b[@]}")" \
        "$(med "${c[@]}")" "$(med "${d[@]}")" "$(med "${e[@]}")"
done
