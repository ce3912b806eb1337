#!/usr/bin/env bash
# The whole test suite: installs what is missing, then builds and runs ctest
# three times: a -Werror build (build/), a clang ASan+UBSan build with the
# libFuzzer harnesses, each fuzzed for a bounded time (build-asan/), and a
# ThreadSanitizer build of what the multithreaded verbs and unit tests need
# (build-tsan/).
#
# What runs where, so that no test runs twice for nothing:
# - gcc: every test but the fuzzers and the scenario tests. The scenario
#   tests are deterministic simulations (seeded, simulated time): the same
#   packets and checks in both builds, so they run once, under ASan+UBSan,
#   which also checks every memory access of the engine they drive.
# - ASan+UBSan: every test but Debian's prebuilt clients (they cannot load a
#   sanitized libibverbs: the ASan runtime must come first), and of the
#   srccl collectives the larger rank counts and the second chunk-wrap run
#   (SR_ASAN_SKIP): n2..n5 take every code path of ring and recursive
#   doubling (powers of two and not, the fold step) and wrap_n2 the 16-bit
#   wrap, while n6..n8 and wrap_n3 repeat them at 2..6 times the cost under
#   ASan; the gcc build runs them all.
# - TSan: the verbs and unit tests, less the prebuilt clients, the hostile
#   peers and the timing-bound tests; only their targets are built.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

jobs=$(nproc)
echo "== build (gcc, -Werror) =="
cmake -S . -B build -DSR_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" -LE "fuzz|scenario"

echo "== build-asan (clang, ASan+UBSan, libFuzzer) =="
# 30 s per harness from its committed corpus: the corpus replays in full
# each run (the regression half); longer runs are for SR_FUZZ_SECONDS
CC=clang cmake -S . -B build-asan -DSR_WERROR=ON -DSR_SANITIZE=ON -DSR_FUZZ=ON \
  -DSR_FUZZ_SECONDS="${SR_FUZZ_SECONDS:-30}" >/dev/null
cmake --build build-asan -j"$jobs"
asan_skip=${SR_ASAN_SKIP:-'^srccl\.coll\.(n[678]|wrap_n3)$'}
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE debian-bin -E "$asan_skip"

echo "== build-tsan (clang, ThreadSanitizer: the multithreaded verbs tests) =="
tsan_sel=(-L "verbs|unit" -LE "debian-bin|hostile|timing")
CC=clang cmake -S . -B build-tsan -DSR_WERROR=ON -DSR_TSAN=ON >/dev/null
# only the executables those tests run ("all" when one runs a script)
mapfile -t tsan_targets < <(python3 scripts/ctest_targets.py build-tsan "${tsan_sel[@]}")
if [ "${tsan_targets[*]}" = all ]; then
  cmake --build build-tsan -j"$jobs"
else
  cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}"
fi
TSAN_OPTIONS=halt_on_error=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs" "${tsan_sel[@]}"
