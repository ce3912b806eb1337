#!/bin/sh
# Fails when a sans-IO layer (src/wire, src/engine, src/cc, the progress
# policy in src/progress/policy.c) includes a socket,
# thread or clock header or calls a clock, sleep or thread function.
root=${1:-.}
bad=0
for dir in src/wire src/engine src/cc src/progress/policy.c src/progress/sr_progress.h; do
  [ -e "$root/$dir" ] || continue
  hits=$(grep -nE '#[[:space:]]*include[[:space:]]*<(sys/socket\.h|netinet/[a-z_]+\.h|arpa/inet\.h|pthread\.h|threads\.h|time\.h|sys/time\.h|unistd\.h|sys/epoll\.h|poll\.h|signal\.h)>|\b(clock_gettime|gettimeofday|time|nanosleep|usleep|sleep|pthread_[a-z_]+|socket|sendmsg|recvmsg|sendto|recvfrom|rand|srand|getenv)[[:space:]]*\(' \
          $(find "$root/$dir" -name '*.[ch]' ! -name crc_gen.c) 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "layer violation in $dir (sans-IO: no sockets, threads, clocks, sleeps, globals from the environment):"
    echo "$hits"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "layers ok"
exit $bad
