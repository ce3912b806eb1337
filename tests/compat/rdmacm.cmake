# rdma_cm clients on softrdma's librdmacm.so.1 (src/cm), unmodified Debian
# binaries, each over shared memory (_shm) and over UDP (_udp,
# SOFTRDMA_SHM=0): rdmacm-utils, perftest's -R, qperf -cm1, libfabric's
# verbs provider (fi_info, fi_pingpong) and rdma-core's test_rdmacm.
# cm_pair.sh runs a server and a client on a port no other test holds.
set(sr_cm_pair ${SR_COMPAT_DIR}/cm_pair.sh ${SR_LIBDIR})
set(sr_cm_tests)

# sr_cm_both(NAME ARGS...): NAME_shm and NAME_udp running ARGS
macro(sr_cm_both name)
  add_test(NAME ${name}_shm COMMAND ${ARGN})
  add_test(NAME ${name}_udp COMMAND ${ARGN})
  set_tests_properties(${name}_udp PROPERTIES ENVIRONMENT SOFTRDMA_SHM=0)
  list(APPEND sr_cm_tests ${name}_shm ${name}_udp)
endmacro()

find_program(RPING rping)
if(RPING)
  sr_cm_both(compat.rping ${SR_COMPAT_DIR}/rping.sh ${SR_LIBDIR} ${RPING} 1000)
endif()

find_program(UCMATOSE ucmatose)
if(UCMATOSE)
  # several connections on one listener, data both ways, disconnects
  sr_cm_both(compat.ucmatose ${sr_cm_pair} cm:106
             ${UCMATOSE} -p @PORT@ -c 6 -C 20 --
             ${UCMATOSE} -s 127.0.0.1 -p @PORT@ -c 6 -C 20 --
             "c:^return status 0" "s:^return status 0")
endif()

find_program(RDMA_SERVER rdma_server)
find_program(RDMA_CLIENT rdma_client)
if(RDMA_SERVER AND RDMA_CLIENT)
  # rdma_create_ep, rdma_get_request, rdma_reg_msgs, rdma_get_*_comp
  sr_cm_both(compat.rdma_server ${sr_cm_pair} cm:106
             ${RDMA_SERVER} -p @PORT@ -- ${RDMA_CLIENT} -s 127.0.0.1 -p @PORT@ --
             "c:rdma_client: end 0" "s:rdma_server: end 0")
endif()

find_program(RDMA_XSERVER rdma_xserver)
find_program(RDMA_XCLIENT rdma_xclient)
if(RDMA_XSERVER AND RDMA_XCLIENT)
  # -c x: XRC (RDMA_PS_IB, XRC_SEND to an XRC target and its SRQ); -c r: RC
  sr_cm_both(compat.rdma_xserver_xrc ${sr_cm_pair} cm:13f
             ${RDMA_XSERVER} -c x -p @PORT@ -- ${RDMA_XCLIENT} -c x -s 127.0.0.1 -p @PORT@ --
             "c:rdma_xclient: end 0" "s:rdma_xserver: end 0")
  sr_cm_both(compat.rdma_xserver_rc ${sr_cm_pair} cm:106
             ${RDMA_XSERVER} -c r -p @PORT@ -- ${RDMA_XCLIENT} -c r -s 127.0.0.1 -p @PORT@ --
             "c:rdma_xclient: end 0" "s:rdma_xserver: end 0")
endif()

find_program(CMTIME cmtime)
if(CMTIME)
  # cmtime's server serves until it is stopped
  sr_cm_both(compat.cmtime ${sr_cm_pair} cm:106
             ${CMTIME} -p @PORT@ -c 50 -- ${CMTIME} -s 127.0.0.1 -p @PORT@ -c 50 --
             "c:^connect +:" "c:^disconnect +:")
  # 200 connects and disconnects at once, no MAD resent (Max CM Retries
  # 0): QP1's queues take the burst of REQs, REPs and DREQs (docs/CM.md)
  sr_cm_both(compat.cmtime_burst ${sr_cm_pair} cm:106
             ${CMTIME} -p @PORT@ -c 200 -- ${CMTIME} -s 127.0.0.1 -p @PORT@ -c 200 --
             "c:^connect +:" "c:^disconnect +:" "!c:^event: " "!s:^event: ")
  set_tests_properties(compat.cmtime_shm compat.cmtime_udp PROPERTIES
                       ENVIRONMENT_MODIFICATION "SR_SERVER_STAYS=set:1")
  set_tests_properties(compat.cmtime_burst_shm compat.cmtime_burst_udp PROPERTIES
                       ENVIRONMENT_MODIFICATION "SR_SERVER_STAYS=set:1;SOFTRDMA_CM_RETRIES=set:0")
endif()

find_program(UDADDY udaddy)
if(UDADDY)
  # UD ids through SIDR; udaddy's port (7174) is fixed: one at a time
  sr_cm_both(compat.udaddy ${sr_cm_pair} none
             ${UDADDY} -c 4 -C 20 -- ${UDADDY} -s 127.0.0.1 -c 4 -C 20 --
             "c:^return status 0" "s:^return status 0")
  set_tests_properties(compat.udaddy_shm compat.udaddy_udp PROPERTIES RESOURCE_LOCK udaddy_port)
endif()

# perftest with -R: both the control exchange and the measured QPs through
# rdma_cm (the server listens for the second only after the first).
# ib_atomic_lat's server returns from main with its connection open: the
# client's DREQ is answered by the DREQ its exit sends (docs/CM.md).
foreach(prog ib_send_bw ib_send_lat ib_write_bw ib_write_lat ib_read_bw ib_read_lat
             ib_atomic_bw ib_atomic_lat)
  find_program(SR_PT_${prog} ${prog})
  if(SR_PT_${prog})
    sr_cm_both(compat.perftest_R_${prog} ${sr_cm_pair} cm:106
               ${SR_PT_${prog}} -R -F -x 0 -p @PORT@ --
               ${SR_PT_${prog}} -R -F -x 0 -p @PORT@ 127.0.0.1 --
               "c:^ *[0-9]+ +[0-9]+ +[0-9]+\\.[0-9]+" "s:rdma_cm QPs.*: ON")
  endif()
endforeach()

# the same between two network namespaces over a veth pair, each side's
# device on its namespace's address (perftest_netns.sh; needs root)
foreach(prog ib_write_bw ib_send_lat ib_atomic_lat)
  if(SR_PT_${prog})
    add_test(NAME compat.perftest_R_netns_${prog}
             COMMAND ${SR_COMPAT_DIR}/perftest_netns.sh ${SR_LIBDIR} ${SR_PT_${prog}})
    set_tests_properties(compat.perftest_R_netns_${prog} PROPERTIES
                         LABELS "compat;debian-bin;netns" TIMEOUT 120 SKIP_RETURN_CODE 77)
  endif()
endforeach()

find_program(QPERF qperf)
if(QPERF)
  # the RC tests over rdma_cm; qperf's UD tests take no -cm1 (docs/CM.md)
  sr_cm_both(compat.qperf_cm ${sr_cm_pair} tcp
             ${QPERF} -lp @PORT@ --
             ${QPERF} -lp @PORT@ -t 1 -cm1 127.0.0.1 rc_bw rc_lat rc_rdma_read_bw
             rc_rdma_write_bw --
             "c:^rc_bw:" "c:^rc_lat:" "c:latency += " "c:^rc_rdma_read_bw:"
             "c:^rc_rdma_write_bw:" "c:bw += +[0-9.]+ [KMG]B/sec")
  set_tests_properties(compat.qperf_cm_shm compat.qperf_cm_udp PROPERTIES
                       ENVIRONMENT_MODIFICATION "SR_SERVER_STAYS=set:1")
endif()

find_program(FI_INFO fi_info)
find_program(FI_PINGPONG fi_pingpong)
if(FI_INFO)
  add_test(NAME compat.fi_info_verbs
           COMMAND sh -c "LD_LIBRARY_PATH=${SR_LIBDIR} ${FI_INFO} -p verbs >/tmp/sr-fi-info.$$ 2>&1; rc=$?; cat /tmp/sr-fi-info.$$; for d in 'domain: srdma0$' 'domain: srdma0-dgram$' 'verbs;ofi_rxm'; do grep -qE \"$d\" /tmp/sr-fi-info.$$ || { echo \"FAIL: no $d\"; rm -f /tmp/sr-fi-info.$$; exit 1; }; done; rm -f /tmp/sr-fi-info.$$; exit $rc")
  list(APPEND sr_cm_tests compat.fi_info_verbs)
endif()
if(FI_PINGPONG)
  # -c: fi_pingpong checks every message's data; msg: verbs over rdma_cm,
  # rdm: ofi_rxm over verbs msg endpoints, dgram: verbs UD
  foreach(ep msg rdm dgram)
    sr_cm_both(compat.fi_pingpong_${ep} ${sr_cm_pair} tcp
               ${FI_PINGPONG} -p verbs -e ${ep} -c -I 50 -B @PORT@ --
               ${FI_PINGPONG} -p verbs -e ${ep} -c -I 50 -P @PORT@ 127.0.0.1 --
               "c:^[0-9]+[kmg]? +50 +=50 " "s:^[0-9]+[kmg]? +50 +=50 ")
  endforeach()
endif()

if(EXISTS /usr/share/doc/rdma-core/tests/test_rdmacm.py.gz OR
   EXISTS /usr/share/doc/rdma-core/tests/test_rdmacm.py)
  if(EXISTS /usr/bin/python3)
    sr_cm_both(compat.pyverbs_rdmacm ${SR_COMPAT_DIR}/pyverbs_rdmacm.sh ${SR_LIBDIR})
    set_tests_properties(compat.pyverbs_rdmacm_shm compat.pyverbs_rdmacm_udp PROPERTIES
                         SKIP_RETURN_CODE 77 RESOURCE_LOCK pyverbs_rdmacm)
  endif()
endif()

if(sr_cm_tests)
  set_tests_properties(${sr_cm_tests} PROPERTIES LABELS "compat;debian-bin" TIMEOUT 180)
endif()
