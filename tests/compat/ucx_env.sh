# ucx_env.sh (sourced by ucx.sh and openmpi.sh): what UCX needs before it
# can see srdma0, else exit 77 (ctest SKIP) saying what is missing.
#   LIBDIR: build/lib; SR_COMPAT_LDPATH overrides the LD_LIBRARY_PATH used.
ldpath=${SR_COMPAT_LDPATH:-$libdir}
export LD_LIBRARY_PATH=$ldpath
# libuct_ib.so.0 is linked (BIND_NOW) against libmlx5.so.1's mlx5dv_* API
if ! LD_BIND_NOW=1 python3 -c 'import ctypes,sys; ctypes.CDLL(sys.argv[1])' \
     /usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0 2>/dev/null; then
  echo "SKIP: libuct_ib.so.0 does not load with LD_LIBRARY_PATH=$ldpath (the libmlx5.so.1 stand-in lacks mlx5dv symbols)"
  exit 77
fi
# UCX stat()s /dev/infiniband/<dev_name> (see docs/COMPATIBILITY.md, UCX)
setup=$(dirname "$0")/../../scripts/setup-devices.sh
if ! "$setup" --check 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then "$setup"; fi
  if ! "$setup" --check; then echo "SKIP: run scripts/setup-devices.sh as root"; exit 77; fi
fi
