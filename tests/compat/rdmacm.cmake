# rdma_cm clients on softrdma's librdmacm.so.1 (src/cm): its exports against
# Debian's, and unmodified rping over shared memory and over UDP.
find_program(RPING rping)
if(EXISTS /usr/lib/x86_64-linux-gnu/librdmacm.so.1)
  add_test(NAME compat.rdmacm_exports
           COMMAND bash -c "diff <(readelf -W --dyn-syms /usr/lib/x86_64-linux-gnu/librdmacm.so.1 | awk '$7!=\"UND\" && NR>3 {print $8}' | sort) <(readelf -W --dyn-syms ${SR_LIBDIR}/librdmacm.so.1 | awk '$7!=\"UND\" && NR>3 {print $8}' | sort)")
  set_tests_properties(compat.rdmacm_exports PROPERTIES LABELS "compat" TIMEOUT 30)
endif()
if(RPING)
  add_test(NAME compat.rping_shm COMMAND ${SR_COMPAT_DIR}/rping.sh ${SR_LIBDIR} ${RPING} 1000)
  add_test(NAME compat.rping_udp COMMAND ${SR_COMPAT_DIR}/rping.sh ${SR_LIBDIR} ${RPING} 1000)
  set_tests_properties(compat.rping_udp PROPERTIES ENVIRONMENT SOFTRDMA_SHM=0)
  set_tests_properties(compat.rping_shm compat.rping_udp PROPERTIES
                       LABELS "compat;debian-bin" TIMEOUT 120)
endif()
