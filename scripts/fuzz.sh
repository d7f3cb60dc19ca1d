#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang into build-fuzz/ and runs them
# (docs/testing.md, "Fuzzing").
#   scripts/fuzz.sh [TARGET] [--seconds N]   run one target, or every target one after another,
#                                            N seconds each (default 60)
#   scripts/fuzz.sh TARGET --minimize FILE   shrink a failing input; writes FILE.min
#   scripts/fuzz.sh --write-seeds            regenerate tests/fuzz/corpus/ with fuzz-seed-generator
#   scripts/fuzz.sh --list                   print the targets
# Each run reads the repository's seeds (tests/fuzz/corpus/TARGET/) and regression inputs
# (tests/fuzz/regressions/TARGET/) and writes only under build-fuzz/: the growing corpus in
# build-fuzz/corpus/TARGET/, failing inputs in build-fuzz/findings/TARGET/, the log in
# build-fuzz/logs/TARGET.log. Runs under `nice` (FUZZ_NICE, default 10). Exit status: 0 when no
# target found anything, 1 when one did, 2 for bad usage or a missing toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=build-fuzz
targets=$(sed -n 's/^regent_fuzz_target(\([a-z_]*\).*/\1/p' tests/fuzz/CMakeLists.txt)

# The longest input each target is given: enough for its largest seed and some growth.
max_len_of() {
  case "$1" in
    config) echo 16384 ;;          # conf/regent.yaml (~8 KiB) plus environment and --set lines
    jobgraph) echo 16384 ;;
    stored_records) echo 8192 ;;
    leader_info) echo 4096 ;;
    rpc_framing) echo 16384 ;;     # many frames; the limit byte makes small caps reachable
    auth_handshake) echo 4096 ;;   # up to 64 steps per connection, most of a few bytes
    output_token) echo 256 ;;      # a token is 88 characters; a little more shows the length check
    *) echo 8192 ;;
  esac
}

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

target=""
seconds=60
minimize=""
write_seeds=false
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] || usage; seconds=$2; shift 2 ;;
    --minimize) [ $# -ge 2 ] || usage; minimize=$2; shift 2 ;;
    --write-seeds) write_seeds=true; shift ;;
    --list) echo "$targets"; exit 0 ;;
    -h|--help) usage ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage ;;
    *)
      if ! grep -qx "$1" <<<"$targets"; then
        echo "fuzz.sh: unknown target \"$1\"; targets: $(echo $targets)" >&2
        exit 2
      fi
      target=$1; shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds wants a whole number of seconds > 0, got \"$seconds\"" >&2
  exit 2
fi
if [ -n "$minimize" ] && [ -z "$target" ]; then
  echo "fuzz.sh: --minimize needs a TARGET" >&2
  exit 2
fi

# clang with its libFuzzer runtime (Debian: clang, libclang-rt-14-dev; scripts/install-deps.sh).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  >"$probe/probe.cc"
if ! command -v clang++ >/dev/null || ! clang++ -fsanitize=fuzzer,address "$probe/probe.cc" -o "$probe/probe" 2>"$probe/log"; then
  cat "$probe/log" >&2 2>/dev/null || true
  echo "fuzz.sh: needs clang++ with libFuzzer (run scripts/install-deps.sh)" >&2
  exit 2
fi

# Debug (assertions on) at -O1: several times the executions per second of -O0.
CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
  -DREGENT_FUZZ=ON -DREGENT_BUILD_TESTS=OFF -DREGENT_SANITIZE=OFF -DREGENT_WERROR=OFF >/dev/null

if $write_seeds; then
  cmake --build "$dir" --target fuzz-seed-generator
  exec "$dir/bin/fuzz-seed-generator" tests/fuzz/corpus
fi

run=${target:-$targets}
build_targets=()
for t in $run; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$dir" "${build_targets[@]}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
nice=(nice -n "${FUZZ_NICE:-10}")

if [ -n "$minimize" ]; then
  exec "${nice[@]}" "$dir/bin/fuzz_$target" -minimize_crash=1 -max_total_time="$seconds" -timeout=10 \
    -exact_artifact_path="$minimize.min" "$minimize"
fi

status=0
summary=()
for t in $run; do
  corpus="$dir/corpus/$t"
  findings="$dir/findings/$t"
  log="$dir/logs/$t.log"
  mkdir -p "$corpus" "$findings" "$dir/logs"
  read_only=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && read_only+=("tests/fuzz/regressions/$t")
  before=$(find "$findings" -type f | wc -l)
  echo "fuzz.sh: $t for ${seconds}s (log $log)"
  # -timeout: one input running longer is a hang; -rss_limit_mb: more memory is a finding;
  # the first corpus directory is the writable one, the repository's are only read.
  "${nice[@]}" "$dir/bin/fuzz_$t" \
    -max_total_time="$seconds" -max_len="$(max_len_of "$t")" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" \
    "$corpus" "${read_only[@]}" >"$log" 2>&1 || true
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  found=$(( $(find "$findings" -type f | wc -l) - before ))
  if [ -z "$execs" ] || [ "$found" -gt 0 ]; then
    status=1
    grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error|SUMMARY' "$log" >&2 || true
    [ -z "$execs" ] && echo "fuzz.sh: $t stopped early; see $log" >&2
  fi
  summary+=("$(printf '%-16s %6ss %12s execs %8s exec/s %6s corpus %3s findings' \
    "$t" "$seconds" "${execs:-?}" "${rate:-?}" "$units" "$found")")
done

echo "fuzz.sh: summary (findings in $dir/findings/TARGET/; minimize one with --minimize, then"
echo "         add it to tests/fuzz/regressions/TARGET/ so the ordinary ctest replays it)"
printf '  %s\n' "${summary[@]}"
exit $status
