#!/usr/bin/env bash
# One-time setup for programs that look at the file system for an RDMA
# device instead of asking libibverbs (see docs/COMPATIBILITY.md, "UCX").
#
# Creates /dev/infiniband/uverbs0 as a symbolic link to /dev/null, unless
# something by that name exists already (a real RDMA device's node is left
# alone). UCX's uct_ib_device_is_accessible() stat()s
# /dev/infiniband/<ibv_device.dev_name> and skips a device unless that is a
# character device it may read and write; softrdma's device reports
# dev_name "uverbs0". softrdma never opens the file.
#
# Idempotent; needs root (uses sudo when not root). --check only reports.
set -euo pipefail

node=/dev/infiniband/uverbs0
if [ -c "$node" ]; then
  exit 0
fi
if [ -e "$node" ] || [ -L "$node" ]; then
  echo "$node exists and is not a character device: left alone" >&2
  exit 1
fi
if [ "${1:-}" = --check ]; then
  echo "missing: $node (run scripts/setup-devices.sh)" >&2
  exit 1
fi
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to create $node" >&2; exit 1; }
  SUDO=sudo
fi
$SUDO mkdir -p /dev/infiniband
$SUDO ln -sfn /dev/null "$node"
echo "softrdma: created $node -> /dev/null (for UCX's device check)" >&2
