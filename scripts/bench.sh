#!/usr/bin/env bash
# Makes the release build and runs one benchmark from bench/, printing its result lines.
#   scripts/bench.sh NAME [ARGS...]
#   scripts/bench.sh slots [--workers N[,N...]] [--slots S] [--runs n]   (docs/benchmarks.md)
#   scripts/bench.sh jobs [--jobs N] [--in-flight N] [--workers N] [--slots S]   (docs/benchmarks.md)
#   scripts/bench.sh reconcile [--jobs N[,N...]] [--case kill,handover] [--slots S]   (docs/benchmarks.md)
#   scripts/bench.sh providers [--runs N] [--workers N]   (docs/benchmarks.md)
#   scripts/bench.sh spawn [--spawns N] [--parent-mb M[,M...]]   (docs/benchmarks.md)
set -euo pipefail
cd "$(dirname "$0")/.."

available=$(find bench -name 'bench_*.cc' -printf '%f\n' 2>/dev/null | sed 's/^bench_//; s/\.cc$//' | sort)
if [ $# -lt 1 ]; then
  echo "usage: scripts/bench.sh NAME [ARGS...]" >&2
  echo "benchmarks: ${available:-none yet}" >&2
  exit 2
fi
name=$1
shift
if ! grep -qx "$name" <<<"$available"; then
  echo "bench.sh: unknown benchmark \"$name\"; available: ${available:-none yet}" >&2
  exit 2
fi
scripts/install-deps.sh >/dev/null
# The benchmark's target depends on the binaries it starts (see bench/CMakeLists.txt).
if ! build_log=$(scripts/build.sh --release "bench_$name" 2>&1); then
  echo "$build_log" >&2
  echo "bench.sh: building bench_$name failed" >&2
  exit 1
fi
if [ "$name" = slots ]; then
  # Every simulated worker holds an RPC connection (two while it lingers on a leader it left), in
  # the load generator and in the masters: raise the soft open-file limit to the hard one.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  echo "# open-file limit $(ulimit -n) (hard $(ulimit -Hn))"
fi
exec "build-release/bin/bench_$name" "$@"
