# compat.exports: our libibverbs.so.1 and the stand-in vendor libraries
# export what Debian 12's do (symbols, versions, default-vs-compat, the
# version nodes' parent chain), and libibverbs' exports keep the system
# header's (or rdma-core 44's) C prototypes. To check another library, add
# its row to LIBS in check_exports.py.
#
# The signature half reads gcc -aux-info of the verbs sources: a second,
# never-linked compile of them (sr_exports_aux), one .aux file per source.
# -aux-info is gcc's; the clang (sanitizer) builds check the exports only.
set(sr_exports_sig)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  file(GLOB sr_exports_verbs_srcs ${CMAKE_SOURCE_DIR}/src/verbs/*.c)
  set(sr_exports_auxdir ${CMAKE_CURRENT_BINARY_DIR}/exports_aux)
  file(MAKE_DIRECTORY ${sr_exports_auxdir})
  add_library(sr_exports_aux OBJECT ${sr_exports_verbs_srcs})
  target_link_libraries(sr_exports_aux PRIVATE sr_progress)
  foreach(s ${sr_exports_verbs_srcs})
    get_filename_component(n ${s} NAME_WE)
    set_source_files_properties(${s} PROPERTIES
      COMPILE_OPTIONS "-aux-info;${sr_exports_auxdir}/${n}.aux")
  endforeach()
  add_dependencies(sr_exports_aux ibverbs stub_mlx5 stub_efa)
  set(sr_exports_sig --sig ${sr_exports_auxdir})
endif()

if(Python3_Interpreter_FOUND)
  add_test(NAME compat.exports
           COMMAND ${Python3_EXECUTABLE} ${SR_COMPAT_DIR}/check_exports.py
                   --libdir ${SR_LIBDIR} ${sr_exports_sig})
  set_tests_properties(compat.exports PROPERTIES LABELS compat TIMEOUT 120)
endif()

# compat.vendor_loads.*: Debian programs linked against libmlx5.so.1 or
# libefa.so.1 load on our stand-ins (no symbol or version lookup error)
# and get the stand-ins' "not my device" answers.
find_program(SR_UCX_INFO ucx_info)
find_program(SR_FI_INFO fi_info)
set(sr_vendor_loads)
if(SR_UCX_INFO)
  list(APPEND sr_vendor_loads ucx)
endif()
if(SR_FI_INFO)
  list(APPEND sr_vendor_loads fabric_tcp fabric_efa)
endif()
if(EXISTS /usr/lib/python3/dist-packages/pyverbs)
  list(APPEND sr_vendor_loads pyverbs)
  if(EXISTS /usr/share/doc/rdma-core/tests)
    list(APPEND sr_vendor_loads rdma_core_tests)
  endif()
endif()
if(Python3_Interpreter_FOUND)
  foreach(c ${sr_vendor_loads})
    add_test(NAME compat.vendor_loads.${c}
             COMMAND ${Python3_EXECUTABLE} ${SR_COMPAT_DIR}/vendor_loads.py ${SR_LIBDIR} ${c})
    set_tests_properties(compat.vendor_loads.${c} PROPERTIES LABELS "compat;debian-bin"
                         TIMEOUT 180)
  endforeach()
endif()

# compat.vendor_stubs: the stubs' answers for objects of our device.
add_executable(compat_vendor_stubs_test vendor_stubs_test.c)
target_link_libraries(compat_vendor_stubs_test PRIVATE ibverbs stub_mlx5 stub_efa)
add_test(NAME compat.vendor_stubs COMMAND compat_vendor_stubs_test)
set_tests_properties(compat.vendor_stubs PROPERTIES LABELS compat TIMEOUT 60)
