#!/bin/sh
# Captures one link of a small fabric run (verified mode, ECN marks) and
# one of a header-only run with trimming, and has tshark read both: it must
# read every frame without an error or a malformed packet, and count as
# many frames as the link carried. Skipped (77) without tshark.
bin=$1
command -v tshark >/dev/null 2>&1 || { echo "tshark not installed: skipped"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
check() { # pcap links.csv from to
  n=$(awk -F, -v a="$3" -v b="$4" '$2 == a && $3 == b { print $5 }' "$2")
  out=$(tshark -r "$1" 2>"$dir/err") || { echo "tshark failed on $1"; cat "$dir/err"; exit 1; }
  if grep -q -v -e '^Running as user' "$dir/err"; then echo "tshark errors on $1:"; cat "$dir/err"; exit 1; fi
  if printf '%s\n' "$out" | grep -q -i -e malformed -e 'invalid packet'; then
    echo "malformed frames in $1:"; printf '%s\n' "$out" | grep -i -e malformed -e invalid | head; exit 1
  fi
  frames=$(printf '%s\n' "$out" | grep -c 'RRoCE')
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$frames" -eq "$n" ] || {
    echo "$1: $frames RoCE frames, link $3->$4 carried $n"; exit 1; }
  echo "$1: $frames frames, all RoCEv2, no errors"
}
"$bin" --topo fat-tree --k 4 --workload ring --size 512K --kmin 8K --kmax 32K --loss 1e-3 \
       --timeout 4 --pcap edge0.0:agg0.1 "$dir/v.pcap" --links-csv "$dir/v.csv" >/dev/null || {
  echo "verified run failed"; exit 1; }
check "$dir/v.pcap" "$dir/v.csv" edge0.0 agg0.1
"$bin" --topo leaf-spine --leaves 4 --hosts-per-leaf 8 --spines 2 --workload incast \
       --incast-n 16 --size 128K --buffer 64K --trim --mode header \
       --pcap leaf0:h0 "$dir/h.pcap" --links-csv "$dir/h.csv" >/dev/null || {
  echo "header-only run failed"; exit 1; }
check "$dir/h.pcap" "$dir/h.csv" leaf0 h0
