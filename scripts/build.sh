#!/usr/bin/env bash
# Configures and builds regent.
#   scripts/build.sh [TARGET...]            debug build with ASan+UBSan into build/ (tests included),
#                                           compiled by clang
#   scripts/build.sh --release [TARGET...]  optimized build into build-release/ (demo, benchmarks),
#                                           compiled by GCC
# Executables land in <build dir>/bin/. Warnings are errors in both.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=debug
if [ "${1:-}" = "--release" ]; then
  mode=release
  shift
fi

if [ "$mode" = release ]; then
  dir=build-release
  flags=(-DCMAKE_BUILD_TYPE=Release -DREGENT_SANITIZE=OFF)
else
  dir=build
  # clang compiles the sanitized debug build in about half GCC's time (docs/testing.md, "What the
  # build costs").
  flags=(-DCMAKE_BUILD_TYPE=Debug -DREGENT_SANITIZE=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi

cmake -S . -B "$dir" -G Ninja -DREGENT_WERROR=ON "${flags[@]}" >/dev/null
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
