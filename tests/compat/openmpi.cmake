# Open MPI 4.1 (Debian's openmpi-bin) with pml ucx over srdma0: a checked
# ping-pong and MPI_Allreduce (mpi_check.c, built with mpicc) at 2 and 4
# ranks, through softrdma's shared memory and over UDP (openmpi.sh).
# Skips (77) while UCX cannot see srdma0 (see ucx.cmake).
find_program(MPICC mpicc)
find_program(MPIRUN mpirun)
find_program(UCX_INFO ucx_info)
if(MPICC AND MPIRUN AND UCX_INFO)
  set(sr_mpi_check ${CMAKE_BINARY_DIR}/bin/sr_mpi_check)
  add_custom_command(OUTPUT ${sr_mpi_check}
                     COMMAND ${MPICC} -O2 -Wall -Wextra -Werror -o ${sr_mpi_check}
                             ${SR_COMPAT_DIR}/mpi_check.c
                     DEPENDS ${SR_COMPAT_DIR}/mpi_check.c VERBATIM)
  add_custom_target(sr_mpi_check ALL DEPENDS ${sr_mpi_check})
  foreach(np 2 4)
    foreach(shm 1 0)
      set(t compat.openmpi.np${np}_shm${shm})
      add_test(NAME ${t} COMMAND ${SR_COMPAT_DIR}/openmpi.sh ${SR_LIBDIR} ${sr_mpi_check} ${np}
                                 ${shm})
      set_tests_properties(${t} PROPERTIES LABELS "compat;debian-bin" TIMEOUT 300
                           SKIP_RETURN_CODE 77)
    endforeach()
  endforeach()
endif()
