# Shared by scripts/demo.sh and scripts/compose-demo.sh (sourced, not run): printing, time, the
# JSON fields of `regentctl --json` lines, and waiting for a leader. The script that sources it
# defines ctl(), which runs regentctl with its arguments against the demo's cluster.

say() { printf '\n%s\n' "$*"; }
step() { printf '  %s\n' "$*"; }
now_ms() { date +%s%3N; }

# The value of field $1 in the JSON line on stdin (strings unquoted; empty when absent).
json_field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# Polls `ctl --json leader` (at most $2 s, default 30) until a leader with an epoch above $1
# serves; prints its JSON line. Fails, saying so, when none does in time.
wait_for_leader_after() {
  local line epoch deadline=$(($(now_ms) + ${2:-30} * 1000))
  while [ "$(now_ms)" -lt "$deadline" ]; do
    if line=$(ctl --json leader 2>/dev/null); then
      epoch=$(json_field epoch <<<"$line")
      if [ "${epoch:-0}" -gt "$1" ] && [ "$(json_field status <<<"$line")" = SERVING ]; then
        printf '%s\n' "$line"
        return 0
      fi
    fi
    sleep 0.2
  done
  echo "no leader with an epoch above $1 within ${2:-30} s" >&2
  return 1
}
