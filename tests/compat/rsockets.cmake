# rsockets (src/cm/rsockets.c, docs/CM.md "rsockets"): rdmacm-utils'
# rstream between two processes, and unmodified TCP programs (socat, nc)
# through Debian's rsocket preload library; _shm and _udp (SOFTRDMA_SHM=0)
# as the other rdma_cm clients (rdmacm.cmake defines sr_cm_both).
set(sr_rs_tests)

# sr_rs_both(NAME ARGS...): NAME_shm and NAME_udp running ARGS
macro(sr_rs_both name)
  add_test(NAME ${name}_shm COMMAND ${ARGN})
  add_test(NAME ${name}_udp COMMAND ${ARGN})
  set_tests_properties(${name}_udp PROPERTIES ENVIRONMENT SOFTRDMA_SHM=0)
  list(APPEND sr_rs_tests ${name}_shm ${name}_udp)
endmacro()

find_program(RSTREAM rstream)
if(RSTREAM)
  set(sr_rs_pair ${SR_COMPAT_DIR}/cm_pair.sh ${SR_LIBDIR} cm:106)
  # the default set (latency and bandwidth, 64 B to 1 MiB, nonblocking
  # calls polled with rpoll timeout 0), data verified (-T v) both ways
  add_test(NAME compat.rstream_default_shm COMMAND ${sr_rs_pair}
           ${RSTREAM} -p @PORT@ -T v -- ${RSTREAM} -s 127.0.0.1 -p @PORT@ -T v --
           "c:^64_lat " "c:^1m_bw " "s:^1m_bw ")
  list(APPEND sr_rs_tests compat.rstream_default_shm)
  # async: every call waits in rpoll for POLLIN/POLLOUT (one bulk size: the
  # default set's 100k round trips take minutes on a loaded 2-core host)
  sr_rs_both(compat.rstream_async ${sr_rs_pair}
             ${RSTREAM} -p @PORT@ -T a -T v -S 300000 -C 300 --
             ${RSTREAM} -s 127.0.0.1 -p @PORT@ -T a -T v -S 300000 -C 300 --
             "c:^custom +292k +300 " "s:^custom +292k +300 ")
  # blocking calls with MSG_WAITALL, a size that is no multiple of a buffer
  sr_rs_both(compat.rstream_blocking ${sr_rs_pair}
             ${RSTREAM} -p @PORT@ -T b -T v -S 100003 -C 500 --
             ${RSTREAM} -s 127.0.0.1 -p @PORT@ -T b -T v -S 100003 -C 500 --
             "c:^custom +97k +500 " "s:^custom +97k +500 ")
  # nonblocking, many small transfers: credits returned under load
  sr_rs_both(compat.rstream_small ${sr_rs_pair}
             ${RSTREAM} -p @PORT@ -T v -S 100 -C 20000 -B 4096 --
             ${RSTREAM} -s 127.0.0.1 -p @PORT@ -T v -S 100 -C 20000 -B 4096 --
             "c:^custom +100 +20k " "s:^custom +100 +20k ")
endif()

find_file(RSPRELOAD librspreload.so.1
          PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/rsocket /usr/lib/x86_64-linux-gnu/rsocket
          NO_DEFAULT_PATH)
find_program(SOCAT socat)
find_program(NETCAT nc.openbsd)
if(RSPRELOAD AND SOCAT AND NETCAT)
  foreach(mode push pull reader_killed writer_killed)
    sr_rs_both(compat.rsocket_preload_${mode}
               ${SR_COMPAT_DIR}/rsocket_preload.sh ${SR_LIBDIR} ${RSPRELOAD} ${mode})
  endforeach()
endif()

if(sr_rs_tests)
  set_tests_properties(${sr_rs_tests} PROPERTIES LABELS "compat;debian-bin" TIMEOUT 180)
endif()
if(RSTREAM)
  # the default set's 100k round trips take 10 s on a quiet host and up to a
  # minute on a loaded one
  set_tests_properties(compat.rstream_default_shm PROPERTIES ENVIRONMENT SR_PAIR_SECONDS=170)
endif()

# errno answers, EOF after shutdown, MSG_PEEK, a refused connect, one process
add_executable(rsocket_errors ${CMAKE_CURRENT_LIST_DIR}/rsocket_errors.c)
target_link_libraries(rsocket_errors PRIVATE rdmacm)
add_test(NAME compat.rsocket_errors
         COMMAND sh -c ". ${SR_COMPAT_DIR}/ports.sh; p=$(sr_claim_port) || exit 1; \
LD_LIBRARY_PATH=${SR_LIBDIR} timeout 60 $<TARGET_FILE:rsocket_errors> $p; rc=$?; sr_release_port $p; exit $rc")
set_tests_properties(compat.rsocket_errors PROPERTIES LABELS compat TIMEOUT 120)
