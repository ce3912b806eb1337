# UCX 1.13 (Debian's ucx-utils) on softrdma: device discovery, and
# ucx_perftest over rc_verbs with ud_verbs wiring it up (ucx.sh). They skip
# (77) until libuct_ib.so.0 loads (the libmlx5.so.1 stand-in must export its
# mlx5dv_* imports) and /dev/infiniband/uverbs0 exists (setup-devices.sh,
# which they run when root).
find_program(UCX_INFO ucx_info)
find_program(UCX_PERFTEST ucx_perftest)
if(UCX_INFO AND UCX_PERFTEST)
  add_test(NAME compat.ucx.info COMMAND ${SR_COMPAT_DIR}/ucx.sh ${SR_LIBDIR} info)
  add_test(NAME compat.ucx.perftest COMMAND ${SR_COMPAT_DIR}/ucx.sh ${SR_LIBDIR} perf)
  set_tests_properties(compat.ucx.info PROPERTIES LABELS "compat;debian-bin" TIMEOUT 60
                       SKIP_RETURN_CODE 77)
  # ports 13370 (perftest); runs alone: it bounds a latency
  set_tests_properties(compat.ucx.perftest PROPERTIES LABELS "compat;debian-bin;timing"
                       TIMEOUT 600 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
                       ENVIRONMENT SR_UCX_PORT=13370)
endif()

# UCP's client-server connection through a socket address over UCX's
# rdmacm connection manager on softrdma's librdmacm (ucx_sockaddr.sh:
# libucx-dev's ucp_client_server example, data compared), over shm and UDP
if(UCX_INFO)
  add_test(NAME compat.ucx.sockaddr_rdmacm_shm COMMAND ${SR_COMPAT_DIR}/ucx_sockaddr.sh ${SR_LIBDIR})
  add_test(NAME compat.ucx.sockaddr_rdmacm_udp COMMAND ${SR_COMPAT_DIR}/ucx_sockaddr.sh ${SR_LIBDIR})
  set_tests_properties(compat.ucx.sockaddr_rdmacm_udp PROPERTIES ENVIRONMENT SOFTRDMA_SHM=0)
  set_tests_properties(compat.ucx.sockaddr_rdmacm_shm compat.ucx.sockaddr_rdmacm_udp PROPERTIES
                       LABELS "compat;debian-bin" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
