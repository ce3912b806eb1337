# gnuplot fabric-scale.gp: wall time, CPU time and peak RSS against hosts
# (data: fabric-scale.dat from bench/fabric_scale.sh).
set terminal pngcairo size 800,480
set output 'fabric-scale.png'
set logscale xy 2
set xlabel 'hosts (leaf-spine, permutation of 1 MiB per host, header-only)'
set ylabel 'seconds (median)'
set y2label 'peak RSS (MiB)'
set logscale y2 2
set y2tics
set key top left
set grid
plot 'fabric-scale.dat' using 1:3 with linespoints title 'wall', \
     '' using 1:4 with linespoints title 'CPU (user + system)', \
     '' using 1:5 axes x1y2 with linespoints title 'peak RSS'
