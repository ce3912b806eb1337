#!/usr/bin/env bash
# perf_out.sh SRCCL_RUN SRCCL_PERF MODE: srccl-perf's --csv and --plot.
#   csv     the file has the header and one row per size, every value parses,
#           and the rows agree with the printed table
#   plot    a PNG (magic bytes) is drawn; skipped (77) without gnuplot
#   noplot  --plot without gnuplot in PATH: a clear error, non-zero status
set -u
run=$1 perf=$2 mode=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
args=(-b 8 -e 256K -f 4 -n 2 -w 1 -c 1)  # 8, 32, ..., 128K: 8 sizes
case $mode in
csv)
  "$run" -n 3 -t 60 "$perf" "${args[@]}" --csv "$dir/out.csv" >"$dir/table" 2>&1 ||
    { cat "$dir/table"; fail "srccl-perf failed"; }
  cat "$dir/out.csv"
  want="size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,oop_busbw_gbs,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,ip_wrong"
  [ "$(head -1 "$dir/out.csv")" = "$want" ] || fail "header: $(head -1 "$dir/out.csv")"
  rows=$(($(wc -l <"$dir/out.csv") - 1))
  [ "$rows" -eq 8 ] || fail "$rows rows, expected 8"
  awk -F, 'NR > 1 {
      num = "^[0-9]+(\\.[0-9]+)?$"
      if (NF != 13) { print "row " NR ": " NF " fields"; bad = 1 }
      for (i = 1; i <= 13; i++)
        if (i != 3 && i != 4 && i != 5 && $i !~ num) { print "row " NR " field " i ": " $i; bad = 1 }
      if ($3 != "float" || $4 != "sum" || $5 != -1) { print "row " NR ": " $3 " " $4 " " $5; bad = 1 }
      if ($1 != 8 * 4 ^ (NR - 2)) { print "row " NR ": size " $1; bad = 1 }
      if ($9 != 0 || $13 != 0) { print "row " NR ": wrong values"; bad = 1 }
      if ($6 <= 0 || $10 <= 0) { print "row " NR ": zero time"; bad = 1 }
    } END { exit bad }' "$dir/out.csv" || fail "bad rows"
  # The table and the CSV carry the same sizes and counts.
  t=$(awk '!/^#/ && NF == 13 {print $1 "," $2}' "$dir/table")
  c=$(awk -F, 'NR > 1 {print $1 "," $2}' "$dir/out.csv")
  [ "$t" = "$c" ] || fail "table and CSV differ: $t / $c"
  ;;
plot)
  command -v gnuplot >/dev/null || { echo "SKIP: no gnuplot"; exit 77; }
  "$run" -n 2 -t 60 "$perf" "${args[@]}" --plot "$dir/out.png" >"$dir/table" 2>&1 ||
    { cat "$dir/table"; fail "srccl-perf --plot failed"; }
  magic=$(head -c 8 "$dir/out.png" | od -An -tx1 | tr -d ' \n')
  [ "$magic" = "89504e470d0a1a0a" ] || fail "not a PNG (magic $magic)"
  echo "PNG of $(wc -c <"$dir/out.png") bytes"
  ;;
noplot)
  out=$(PATH=/nonexistent "$run" -n 2 -t 60 "$perf" "${args[@]}" --plot "$dir/out.png" 2>&1)
  rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "status 0 without gnuplot"
  grep -q "needs gnuplot" <<<"$out" || fail "no clear message"
  [ ! -e "$dir/out.png" ] || fail "a PNG appeared"
  ;;
*) fail "mode $mode" ;;
esac
echo PASS
