# Programs that load librdmacm call ibv_get_sysfs_path() first; with no
# rdma_cm device they must then fail with librdmacm's own message.
find_program(RPING rping)
if(RPING)
  add_test(NAME compat.rping_no_cm
           COMMAND ${SR_COMPAT_DIR}/clean_fail.sh ${SR_LIBDIR} "RDMA CM|rdma_cm|event channel"
                   ${RPING} -s -a 127.0.0.1 -C 1)
  set_tests_properties(compat.rping_no_cm PROPERTIES LABELS "compat;debian-bin" TIMEOUT 60)
endif()
