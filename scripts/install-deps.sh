#!/usr/bin/env bash
# Installs everything regent needs to build, test and run its demo, from Debian 12 packages.
# Non-interactive and idempotent: when every package is present it changes nothing.
#   scripts/install-deps.sh
set -euo pipefail

packages=(
  # toolchain: GCC builds the release build (demo, benchmarks); clang with its sanitizer and
  # libFuzzer runtimes builds the debug build the tests run and the fuzzers (docs/testing.md,
  # "What the build costs"); llvm's llvm-symbolizer gives their reports file and line numbers
  g++ cmake ninja-build ccache pkg-config git procps clang libclang-rt-14-dev llvm
  # libraries
  capnproto libcapnp-dev libssl-dev libuv1-dev libzookeeper-st-dev librocksdb-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  # tests: GoogleTest, and the real ZooKeeper server (Java) the fixtures start
  libgtest-dev libgmock-dev zookeeper default-jre-headless
  # tests: the compose tool (no daemon), for `docker-compose config` in compose_file_test
  docker-compose
  # tests: a real headless browser for the masters' status page (status_page_itest)
  chromium
)
if [ $# -gt 0 ]; then
  echo "usage: scripts/install-deps.sh (no arguments)" >&2
  exit 2
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  sudo=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
