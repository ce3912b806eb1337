#!/usr/bin/env bash
# The whole test suite: installs what is missing, then builds and runs ctest
# twice: a -Werror build (build/), and a clang ASan+UBSan build with the
# libFuzzer harnesses, each fuzzed for a bounded time (build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

jobs=$(nproc)
echo "== build (gcc, -Werror) =="
cmake -S . -B build -DSR_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" -LE fuzz

echo "== build-asan (clang, ASan+UBSan, libFuzzer) =="
CC=clang cmake -S . -B build-asan -DSR_WERROR=ON -DSR_SANITIZE=ON -DSR_FUZZ=ON \
  -DSR_FUZZ_SECONDS="${SR_FUZZ_SECONDS:-60}" >/dev/null
cmake --build build-asan -j"$jobs"
# Debian's prebuilt clients (label debian-bin) cannot load a sanitized
# libibverbs (the ASan runtime must come first); they run in build/ above.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE debian-bin

echo "== build-tsan (clang, ThreadSanitizer: the multithreaded verbs tests) =="
CC=clang cmake -S . -B build-tsan -DSR_WERROR=ON -DSR_TSAN=ON >/dev/null
cmake --build build-tsan -j"$jobs"
TSAN_OPTIONS=halt_on_error=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L "verbs|unit" -LE "debian-bin|hostile|timing"
