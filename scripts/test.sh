#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then
#  1. gcc, Release, -Werror: the packagers' build must be warning-free;
#  2. clang, ASan+UBSan, -Werror, libFuzzer targets built: runs every test,
#     including the replay of every fuzz corpus.
# Long fuzzing and benchmarks are separate: scripts/fuzz.sh, uwarp-crc-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

JOBS=$(nproc)
echo "== gcc Release -Werror"
cmake -S . -B build-ci-gcc -DCMAKE_BUILD_TYPE=Release -DUW_WERROR=ON -DUW_REQUIRE_CMOCKA=ON \
      -DCMAKE_C_COMPILER=gcc >/dev/null
cmake --build build-ci-gcc -j "$JOBS"
ctest --test-dir build-ci-gcc -j "$JOBS" --output-on-failure --timeout 600

echo "== clang ASan+UBSan -Werror + fuzzers"
cmake -S . -B build-ci-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUW_WERROR=ON -DUW_SANITIZE=ON \
      -DUW_REQUIRE_CMOCKA=ON \
      -DUW_FUZZ=ON -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build build-ci-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-ci-asan -j "$JOBS" --output-on-failure --timeout 900
