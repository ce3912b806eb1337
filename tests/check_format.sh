#!/bin/sh
# Fails when a tracked C source or header differs from what clang-format
# (the repository's .clang-format) makes of it.
root=${1:-.}
cd "$root" || exit 1
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/deps.sh installs it)"; exit 1; }
files=$(git ls-files '*.c' '*.h' 2>/dev/null)
[ -n "$files" ] || files=$(find src include tests tools bench -name '*.[ch]')
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files || { echo "run: clang-format -i on the files above"; exit 1; }
echo "format ok ($(echo "$files" | wc -w) files)"
