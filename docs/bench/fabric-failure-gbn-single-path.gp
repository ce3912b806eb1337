set terminal pngcairo size 800,480
set output 'fabric-failure-gbn-single-path.png'
set datafile separator ','
set xlabel 'simulated time (us); leaf0-spine0 fails at 300 us'
set ylabel 'delivered throughput, all hosts (Gbit/s, per 10 us)'
set grid
set arrow from 300, graph 0 to 300, graph 1 nohead dashtype 2
plot 'fabric-failure-series-gbn-single-path.csv' using 1:3 with steps title 'gbn-single-path'
