#!/bin/sh
# pyverbs_rdmacm.sh LIBDIR: rdma-core's test_rdmacm module (pyverbs_run.py)
# on softrdma's librdmacm. The suite takes its server address from the
# RDMA device's network interface, which it finds in sysfs
# (/sys/class/infiniband/<dev>/device/net/<ifname>, then `ip -j addr show
# <ifname>`), as the kernel lays it out for a RoCE device such as rxe.
# softrdma's srdma0 has no kernel device, so the run gets that view in a
# mount namespace of its own: /sys/class there is a tmpfs linking to the
# real classes, plus infiniband/srdma0/device/net/lo (the default device
# is bound on loopback). Nothing outside the namespace changes. Without
# root or unshare(1) the test is skipped (77).
set -u
lib=$1
dir=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null || { echo "SKIP: needs root and unshare"; exit 77; }
export SR_PYVERBS_ONLY=test_rdmacm
exec unshare -m --propagation private sh -c '
set -e
v=$(mktemp -d)
mkdir "$v/real"
mount --bind /sys/class "$v/real"
mount -t tmpfs softrdma-sysfs-view /sys/class
for e in "$v"/real/*; do ln -s "$e" "/sys/class/${e##*/}"; done
mkdir -p /sys/class/infiniband/srdma0/device/net/lo
set +e
/usr/bin/python3 "$1/pyverbs_run.py" "$2" "$1/pyverbs_rdmacm_skips.txt"
rc=$?
umount /sys/class; umount "$v/real"; rmdir "$v/real" "$v"
exit $rc' sh "$dir" "$lib"
