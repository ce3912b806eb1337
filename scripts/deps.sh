#!/usr/bin/env bash
# Installs what softrdma needs to build and test on Debian 12, if missing.
# Idempotent: does nothing when everything is present.
set -euo pipefail

pkgs=(
  build-essential cmake clang libclang-rt-14-dev python3  # build, sanitizers, libFuzzer
  clang-format git                                        # lint.format
  tshark                                                  # RoCEv2 dissection in tests
  libibverbs-dev ibverbs-utils perftest                   # verbs ABI header, conformance clients
  librdmacm-dev rdmacm-utils                              # rdma_cm ABI header and clients
  iproute2 ethtool                                        # network namespaces, veth offloads for two-host tests
  gnuplot-nox                                             # srccl-perf --plot (test srccl.perf.plot)
  ucx-utils openmpi-bin libopenmpi-dev                    # tests/compat: UCX, Open MPI (mpicc)
  python3-pyverbs libfabric-bin qperf                     # tests/compat: rdma-core's test suite, libfabric, qperf
  socat netcat-openbsd                                    # tests/compat: TCP programs over rsockets (librspreload)
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# UCX's device check wants /dev/infiniband/uverbs0 (docs/COMPATIBILITY.md);
# created where we can (root), else the UCX tests skip
[ "$(id -u)" -eq 0 ] && "$(dirname "$0")/setup-devices.sh" || true
[ ${#missing[@]} -eq 0 ] && exit 0

echo "softrdma: installing ${missing[*]}" >&2
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
