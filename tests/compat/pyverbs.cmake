# rdma-core's own test suite (Debian's python3-pyverbs and the tests in
# /usr/share/doc/rdma-core/tests), its generic modules run unmodified on
# softrdma: any failure, error or skip not in pyverbs_skips.txt fails.
if(EXISTS /usr/share/doc/rdma-core/tests/run_tests.py AND EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c "import pyverbs.device"
                  RESULT_VARIABLE sr_pyverbs_rc OUTPUT_QUIET ERROR_QUIET)
  if(sr_pyverbs_rc EQUAL 0)
    add_test(NAME compat.pyverbs
             COMMAND /usr/bin/python3 ${SR_COMPAT_DIR}/pyverbs_run.py ${SR_LIBDIR}
                     ${SR_COMPAT_DIR}/pyverbs_skips.txt)
    set_tests_properties(compat.pyverbs PROPERTIES LABELS "compat;debian-bin" TIMEOUT 600
                         RUN_SERIAL TRUE)
  endif()
endif()
