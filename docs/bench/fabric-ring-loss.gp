set terminal pngcairo size 800,480
set output 'fabric-ring-loss.png'
set datafile separator ','
set style data histograms; set style histogram clustered; set style fill solid 0.8 border -1
set ylabel 'ring all-reduce completion time (ms)'
set xlabel 'random loss per packet per link (1,024 hosts, fat-tree k = 16)'
set yrange [0:*]; set grid y; set key top left
plot "< grep '^gbn-single-path,' fabric-ring-loss.csv" using ($4/1000):xtic(2) title 'gbn-single-path'
