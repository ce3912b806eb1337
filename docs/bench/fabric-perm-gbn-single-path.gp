set terminal pngcairo size 1000,420
set output 'fabric-perm-gbn-single-path.png'
set multiplot layout 1,2
set grid
set xlabel 'fabric links, busiest first'
set ylabel 'utilisation until the last completion'
set yrange [0:1]
plot 'perm-util-gbn-single-path.dat' using 1:2 with lines title 'gbn-single-path'
set xlabel 'flow completion time (us); ideal 1342'
set ylabel 'fraction of flows'
set yrange [0:1]
plot 'perm-fct-gbn-single-path.dat' using 1:2 with lines title 'gbn-single-path'
unset multiplot
