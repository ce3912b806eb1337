# bench/fabric_lib.sh: helpers shared by the bench/fabric_*.sh scripts
# (sourced, not run). field NAME reads one value out of an srdma-fabric
# summary on stdin; median prints the median of its arguments.

# The first number after the summary label $1 (labels are the first 22
# columns of a summary line).
field() {
  awk -v k="$1" 'substr($0, 1, length(k)) == k { s = substr($0, 23); split(s, a, /[ (\/]+/);
                  for (i = 1; i <= length(a); i++) if (a[i] ~ /^[0-9.]+$/) { print a[i]; exit } }'
}

# The n-th number on the summary line labelled $1.
field_n() {
  awk -v k="$1" -v n="$2" 'substr($0, 1, length(k)) == k { s = substr($0, 23);
                  c = 0; m = split(s, a, /[ ()\/,%]+/);
                  for (i = 1; i <= m; i++) if (a[i] ~ /^[0-9.]+$/ && ++c == n) { print a[i]; exit } }'
}

median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
                                        else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

spread() { # min..max
  printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo ".." hi }'
}
