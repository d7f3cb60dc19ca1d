#!/usr/bin/env bash
# Installs dependencies, builds with sanitizers, and runs the whole test suite with ctest.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L unit` or `scripts/test.sh -R EventLoop`.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
start=$(date +%s)
# The test binaries and the programs they run (the target regent-tests); `scripts/build.sh` with
# no target also builds the benchmarks and tools no test runs.
scripts/build.sh regent-tests
echo "test.sh: build took $(( $(date +%s) - start ))s"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
status=0
# Each test's timeout (180 s) is its TIMEOUT property, set in tests/CMakeLists.txt.
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@" || status=$?
echo "test.sh: tests took $(( $(date +%s) - start ))s"
exit $status
