#!/usr/bin/env bash
# Runs the seeded chaos suite (docs/testing.md, "Chaos suite") against real processes: a
# three-node ZooKeeper ensemble, three masters, three workers, one fault per round.
#   scripts/chaos.sh [--seed S] [--rounds N] [--faults KIND,KIND...] [--list]
# Without --seed, a random seed is drawn; the seed is printed first and in every violation, and
# the same seed draws the same schedule. --rounds defaults to 20. --faults draws only those
# kinds; --list prints the kinds. Builds the sanitized debug build (as scripts/test.sh does) and
# installs what it needs. Exit status: 0 when every invariant held, 1 when one did not or the
# run failed, 2 for bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

kinds="leader-kill leader-restart leader-pause leader-term ctl-failover standby-kill leader-zk-cut leader-rpc-refuse leader-rpc-stall leader-isolated worker-kill worker-cut worker-pause zk-member zk-quorum"
usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

seed=""
rounds=20
faults=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
    --faults) [ $# -ge 2 ] || usage; faults=$2; shift 2 ;;
    --list) echo "$kinds" | tr ' ' '\n'; exit 0 ;;
    -h|--help) usage ;;
    *) echo "chaos.sh: unknown argument $1" >&2; usage ;;
  esac
done
if [ -z "$seed" ]; then
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
fi
if ! [[ "$seed" =~ ^[0-9]+$ ]]; then
  echo "chaos.sh: --seed wants a whole number, got \"$seed\"" >&2
  exit 2
fi
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "chaos.sh: --rounds wants a whole number > 0, got \"$rounds\"" >&2
  exit 2
fi
for kind in ${faults//,/ }; do
  if ! grep -qw -- "$kind" <<<"$kinds"; then
    echo "chaos.sh: unknown fault \"$kind\"; kinds: $kinds" >&2
    exit 2
  fi
done
echo "chaos.sh: seed $seed, $rounds rounds"

scripts/install-deps.sh
scripts/build.sh chaos_itest

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd build
status=0
CHAOS_SEED=$seed CHAOS_ROUNDS=$rounds CHAOS_FAULTS=$faults bin/chaos_itest || status=1
echo "chaos.sh: seed $seed, $rounds rounds: $([ $status = 0 ] && echo "no violation" || echo "FAILED")"
exit $status
