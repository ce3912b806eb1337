#!/bin/sh
# Runs srdma-fabric twice with the same flags and fails unless both succeed
# and print the same summary, apart from the wall- and CPU-time lines.
bin=$1
shift
a=$("$bin" "$@" 2>/dev/null) || { echo "first run failed"; exit 1; }
b=$("$bin" "$@" 2>/dev/null) || { echo "second run failed"; exit 1; }
strip() { printf '%s\n' "$1" | grep -v -e '^time ' -e '^packet-hop events '; }
if [ "$(strip "$a")" != "$(strip "$b")" ]; then
  echo "runs differ:"
  printf '%s\n---\n%s\n' "$a" "$b"
  exit 1
fi
printf '%s\n' "$a"
