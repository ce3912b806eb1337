# rdma_cm clients on softrdma's librdmacm.so.1 (src/cm): unmodified rping
# over shared memory and over UDP (its exports: compat.exports).
find_program(RPING rping)
if(RPING)
  add_test(NAME compat.rping_shm COMMAND ${SR_COMPAT_DIR}/rping.sh ${SR_LIBDIR} ${RPING} 1000)
  add_test(NAME compat.rping_udp COMMAND ${SR_COMPAT_DIR}/rping.sh ${SR_LIBDIR} ${RPING} 1000)
  set_tests_properties(compat.rping_udp PROPERTIES ENVIRONMENT SOFTRDMA_SHM=0)
  set_tests_properties(compat.rping_shm compat.rping_udp PROPERTIES
                       LABELS "compat;debian-bin" TIMEOUT 120)
endif()
