#!/bin/sh
# A verbs device's congestion control as SOFTRDMA_CC picks it, read back
# from SOFTRDMA_STATS' cc line (printed only when one runs) of Debian's
# ibv_devinfo: DCQCN when unset or empty, none when asked, and a bad value
# reported and left off.
#   device_default.sh LIBDIR
lib=$1
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo not found"; exit 77; }
fails=0
# check SETTING WANT [MESSAGE]: SETTING "-" leaves SOFTRDMA_CC unset
check() {
  if [ "$1" = - ]; then
    o=$(env -u SOFTRDMA_CC SOFTRDMA_STATS=1 LD_LIBRARY_PATH="$lib" ibv_devinfo 2>&1)
  else
    o=$(env SOFTRDMA_CC="$1" SOFTRDMA_STATS=1 LD_LIBRARY_PATH="$lib" ibv_devinfo 2>&1)
  fi
  echo "$o" | grep -q "fw_ver:.*softrdma" || { echo "FAIL [$1]: not softrdma's device"; fails=$((fails + 1)); }
  got=$(echo "$o" | sed -n 's/^softrdma: cc algo=\([a-z]*\).*/\1/p')
  [ "${got:-none}" = "$2" ] || { echo "FAIL [$1]: cc ${got:-none}, want $2"; fails=$((fails + 1)); }
  if [ -n "${3:-}" ]; then
    echo "$o" | grep -q "$3" || { echo "FAIL [$1]: no message '$3'"; fails=$((fails + 1)); }
  fi
  echo "SOFTRDMA_CC=$1: ${got:-none}"
}
check - dcqcn
check "" dcqcn
check none none
check nscc nscc
check "dcqcn,rai_mbps=5" dcqcn
check bogus none "congestion control off"
[ $fails -eq 0 ] || { echo "FAIL: $fails check(s)"; exit 1; }
echo PASS
