# rdma_cm robustness (docs/CM.md "Failures"): unmodified rping when the
# peer is absent or dies, a connect/disconnect loop, a dead idle peer and a
# REQ flood through the public API (rdmacm_stress.c), and the CM's MADs on
# the wire as tshark dissects them (rdmacm_capture.py).
find_program(RPING rping)
find_package(Threads REQUIRED)
add_executable(rdmacm_stress ${CMAKE_CURRENT_LIST_DIR}/rdmacm_stress.c)
target_link_libraries(rdmacm_stress PRIVATE rdmacm ibverbs Threads::Threads)
set_target_properties(rdmacm_stress PROPERTIES BUILD_RPATH ${SR_LIBDIR})

add_test(NAME compat.rdmacm_cycle COMMAND rdmacm_stress cycle 1000 19871)
add_test(NAME compat.rdmacm_idle_peer_killed COMMAND rdmacm_stress idle 19872)
add_test(NAME compat.rdmacm_flood COMMAND rdmacm_stress flood 2000 19873)
# on a port of its own (ports.sh); both drivers: the DREQ must reach the
# peer before the exiting process's device goes
foreach(drv shm udp)
  add_test(NAME compat.rdmacm_late_recv_${drv}
           COMMAND sh -c ". ${SR_COMPAT_DIR}/ports.sh; p=$(sr_claim_port) || exit 1; trap 'sr_release_port $p' EXIT; $<TARGET_FILE:rdmacm_stress> rnr $p")
  set_tests_properties(compat.rdmacm_late_recv_${drv} PROPERTIES LABELS compat TIMEOUT 60
                       ENVIRONMENT "SOFTRDMA_SHM=$<IF:$<STREQUAL:${drv},shm>,1,0>"
                       ENVIRONMENT_MODIFICATION LD_LIBRARY_PATH=path_list_prepend:${SR_LIBDIR})
  add_test(NAME compat.rdmacm_peer_exits_${drv}
           COMMAND sh -c ". ${SR_COMPAT_DIR}/ports.sh; p=$(sr_claim_port) || exit 1; trap 'sr_release_port $p' EXIT; $<TARGET_FILE:rdmacm_stress> exit $p")
  set_tests_properties(compat.rdmacm_peer_exits_${drv} PROPERTIES LABELS compat TIMEOUT 60
                       ENVIRONMENT "SOFTRDMA_CM_KEEPALIVE_MS=0;SOFTRDMA_SHM=$<IF:$<STREQUAL:${drv},shm>,1,0>"
                       ENVIRONMENT_MODIFICATION LD_LIBRARY_PATH=path_list_prepend:${SR_LIBDIR})
endforeach()
# UDP: over shm the process's own ring backlog to itself grows (doubling,
# capped by the shm driver) and would hide what the CM keeps per cycle
set_tests_properties(compat.rdmacm_cycle PROPERTIES ENVIRONMENT SOFTRDMA_SHM=0)
set_tests_properties(compat.rdmacm_idle_peer_killed PROPERTIES
                     ENVIRONMENT SOFTRDMA_CM_KEEPALIVE_MS=300)
set_tests_properties(compat.rdmacm_cycle compat.rdmacm_idle_peer_killed compat.rdmacm_flood
                     PROPERTIES LABELS compat TIMEOUT 60
                     ENVIRONMENT_MODIFICATION LD_LIBRARY_PATH=path_list_prepend:${SR_LIBDIR})

# a REQ that reaches the passive host before its rdma_listen
add_test(NAME compat.rdmacm_late_listener_netns
         COMMAND ${SR_COMPAT_DIR}/rdmacm_late_netns.sh ${SR_LIBDIR} $<TARGET_FILE:rdmacm_stress>)
set_tests_properties(compat.rdmacm_late_listener_netns PROPERTIES
                     LABELS "compat;netns" TIMEOUT 60 SKIP_RETURN_CODE 77)

if(RPING)
  foreach(c reject stopped server client)
    add_test(NAME compat.rdmacm_fail_${c}
             COMMAND ${SR_COMPAT_DIR}/rdmacm_fail.sh ${SR_LIBDIR} ${RPING} ${c})
    set_tests_properties(compat.rdmacm_fail_${c} PROPERTIES
                         LABELS "compat;debian-bin" TIMEOUT 30)
  endforeach()
endif()

find_program(TSHARK tshark)
if(RPING AND TSHARK AND Python3_FOUND)
  # one work directory each: they write files of the same names, and ctest
  # may run them at once
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/capture_lo ${CMAKE_CURRENT_BINARY_DIR}/capture_netns)
  add_test(NAME compat.rdmacm_capture_lo
           COMMAND ${Python3_EXECUTABLE} ${SR_COMPAT_DIR}/rdmacm_capture.py ${SR_LIBDIR} ${RPING}
                   lo ${CMAKE_CURRENT_BINARY_DIR}/capture_lo)
  set_tests_properties(compat.rdmacm_capture_lo PROPERTIES LABELS "compat;debian-bin" TIMEOUT 120)
  add_test(NAME compat.rdmacm_capture_netns
           COMMAND ${Python3_EXECUTABLE} ${SR_COMPAT_DIR}/rdmacm_capture.py ${SR_LIBDIR} ${RPING}
                   netns ${CMAKE_CURRENT_BINARY_DIR}/capture_netns)
  set_tests_properties(compat.rdmacm_capture_netns PROPERTIES
                       LABELS "compat;debian-bin;netns" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
