#!/usr/bin/env bash
# The local demo (README command one): a ZooKeeper server on loopback, three regent masters
# electing a leader, two workers registering their slots, jobs submitted, the leader killed and
# replaced (the jobs still listed, the slot table rebuilt from the workers' reports),
# `regentctl failover`, then a graceful hand-over. Everything it
# starts is stopped, and its temporary directory removed, when it ends (even on Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n%s\n' "$*"; }
step() { printf '  %s\n' "$*"; }
now_ms() { date +%s%3N; }

say "Checking the Debian packages regent needs (installs the missing ones)."
scripts/install-deps.sh
say "Building the release binaries regent-master, regent-worker and regentctl (quick when already built)."
scripts/build.sh --release regent-master regent-worker regentctl
bin="$PWD/build-release/bin"

work=$(mktemp -d -t regent-demo-XXXXXX)
zk_pid=""
master_pids=()
worker_pids=()

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # Workers and masters first (SIGTERM: workers disconnect, masters hand over, all exit), then
  # ZooKeeper; SIGKILL for whatever is still running after 5 s. The shell's "Killed" notes are
  # not news here.
  {
    local pid
    for pid in "${worker_pids[@]}" "${master_pids[@]}"; do kill -TERM "$pid" || true; done
    [ -n "$zk_pid" ] && { kill -TERM "$zk_pid" || true; }
    for _ in $(seq 50); do
      local alive=0
      for pid in "${worker_pids[@]}" "${master_pids[@]}" $zk_pid; do kill -0 "$pid" && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    for pid in "${worker_pids[@]}" "${master_pids[@]}" $zk_pid; do kill -KILL "$pid" || true; done
    wait || true
  } 2>/dev/null
  if [ "${KEEP_DEMO_TMP:-0}" = 1 ]; then
    echo "Kept the demo's files in $work"
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- ZooKeeper -------------------------------------------------------------------------------

# Sends a four-letter word to the demo's ZooKeeper and prints the reply (empty if none).
four_letter_word() {
  local reply=""
  if { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null; then
    printf '%s' "$2" >&3
    reply=$(timeout 2 cat <&3 || true)
    exec 3<&- 3>&-
  fi
  printf '%s' "$reply"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_zookeeper() {
  local attempt
  for attempt in 1 2 3; do
    zk_port=$((20000 + RANDOM % 30000))
    port_in_use "$zk_port" && continue
    mkdir -p "$work/zookeeper/data"
    cat >"$work/zookeeper/zoo.cfg" <<EOF
tickTime=500
dataDir=$work/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
maxClientCnxns=0
EOF
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
      -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zookeeper/zoo.cfg" \
      >"$work/zookeeper/server.log" 2>&1 &
    zk_pid=$!
    # Java needs a few seconds to start; wait (at most 60 s) until the server answers ruok.
    for _ in $(seq 600); do
      if [ "$(four_letter_word "$zk_port" ruok)" = imok ]; then return 0; fi
      kill -0 "$zk_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$zk_pid" 2>/dev/null || true
    wait "$zk_pid" 2>/dev/null || true
    zk_pid=""
    step "(ZooKeeper did not come up on port $zk_port; trying another port)"
  done
  echo "demo: could not start ZooKeeper; its log:" >&2
  tail -n 30 "$work/zookeeper/server.log" >&2 || true
  return 1
}

say "Starting a ZooKeeper server in $work (Debian's zookeeper package, Java)."
start_zookeeper
step "ZooKeeper answers on 127.0.0.1:$zk_port."

# --- Masters -----------------------------------------------------------------------------------

cluster=demo
ctl() { "$bin/regentctl" --zk "127.0.0.1:$zk_port" --cluster-id "$cluster" "$@"; }
json_field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# Polls `regentctl leader` (at most 30 s) until a leader with an epoch above $1 serves; prints
# its JSON line.
wait_for_leader_after() {
  local line epoch
  for _ in $(seq 150); do
    if line=$(ctl --json leader 2>/dev/null); then
      epoch=$(json_field epoch <<<"$line")
      if [ "${epoch:-0}" -gt "$1" ] && [ "$(json_field status <<<"$line")" = SERVING ]; then
        printf '%s\n' "$line"
        return 0
      fi
    fi
    sleep 0.2
  done
  echo "demo: no new leader within 30 s" >&2
  return 1
}

say "Starting three masters. Each joins the leader election in ZooKeeper; the first one in line leads."
for i in 1 2 3; do
  "$bin/regent-master" \
    --set "ha.zookeeper.quorum=127.0.0.1:$zk_port" --set "cluster-id=$cluster" \
    --set ha.zookeeper.session-timeout=4s \
    --set "rpc.bind=127.0.0.1:$((6122 + i))" --set "http.bind=127.0.0.1:$((8080 + i))" \
    >"$work/master-$i.log" 2>&1 &
  master_pids+=($!)
  step "master $i: pid $!, log $work/master-$i.log"
done

leader=$(wait_for_leader_after 0)
epoch=$(json_field epoch <<<"$leader")
leader_pid=$(json_field pid <<<"$leader")
# Wait (at most 10 s) until all three masters have joined, so the table shows them all.
for _ in $(seq 50); do
  [ "$(ctl --json masters 2>/dev/null | grep -c '"role"')" -ge 3 ] && break
  sleep 0.2
done

say "\$ regentctl masters   (every contender, in the order ZooKeeper queued them)"
ctl masters
say "\$ regentctl leader"
ctl leader
step "Epoch $epoch: each new leadership term gets the next epoch, issued once, in ZooKeeper."

say "Starting two workers with 4 slots each. Each finds the leader in ZooKeeper, registers with its ResourceManager and reports its slots."
for i in 1 2; do
  "$bin/regent-worker" \
    --set "ha.zookeeper.quorum=127.0.0.1:$zk_port" --set "cluster-id=$cluster" \
    --set "worker.data-dir=$work/worker-$i" --set "worker.http.bind=127.0.0.1:$((8090 + i))" \
    --set worker.slots=4 --set worker.slot-cpu=0.5 --set worker.slot-memory=512MiB \
    --set heartbeat.interval=500ms --set heartbeat.timeout=3s \
    >"$work/worker-$i.log" 2>&1 &
  worker_pids+=($!)
  step "worker $i: pid $!, log $work/worker-$i.log"
done

# Polls `regentctl workers` (at most 30 s) until $1 workers are registered with the leader.
wait_for_workers() {
  for _ in $(seq 150); do
    [ "$(ctl --json workers 2>/dev/null | grep -c '"resource_id"')" -ge "$1" ] && return 0
    sleep 0.2
  done
  echo "demo: fewer than $1 workers registered within 30 s" >&2
  return 1
}
wait_for_workers 2
say "\$ regentctl workers"
ctl workers
say "\$ regentctl slots"
ctl slots > "$work/slots-before.txt"
cat "$work/slots-before.txt"

say "Submitting three jobs to the leader. Each JobGraph is validated, stored in ZooKeeper, then accepted."
for name in wordcount etl-nightly report; do
  cat >"$work/$name.yaml" <<YAML
name: $name
vertices:
  - name: extract
    parallelism: 2
    command:
      argv: [sleep, "30"]
  - name: load
    parallelism: 1
    command:
      argv: [sleep, "5"]
    upstream: [extract]
YAML
  step "\$ regentctl jobs submit $name.yaml   ->   $(ctl jobs submit "$work/$name.yaml")"
done
say "\$ regentctl jobs list"
ctl jobs list

say "Killing the leader (pid $leader_pid) with SIGKILL: no goodbye, as if its machine died."
killed_at=$(now_ms)
kill -KILL "$leader_pid"
wait "$leader_pid" 2>/dev/null || true
step "Its ZooKeeper session stays alive until the 4 s session timeout runs out; then a standby takes over."
leader=$(wait_for_leader_after "$epoch")
step "A new leader was elected $(($(json_field elected_at_ms <<<"$leader") - killed_at)) ms after the kill (its elected-at time in ZooKeeper)."
epoch=$(json_field epoch <<<"$leader")
leader_pid=$(json_field pid <<<"$leader")
say "\$ regentctl leader"
ctl leader
step "The epoch went up by one, to $epoch."
say "\$ regentctl jobs list   (the new leader recovered every job from ZooKeeper)"
ctl jobs list

say "The workers noticed the new leader in ZooKeeper and registered with it; its slot table is rebuilt from their reports alone."
wait_for_workers 2
# The new leader's log has a "slot report" event line per worker; the one that makes the table
# whole (workers_reported=2) says when, next to its grant.
for i in 1 2 3; do
  if grep -q "leadership granted epoch=$epoch " "$work/master-$i.log"; then
    granted_ms=$(grep "leadership granted epoch=$epoch " "$work/master-$i.log" | sed -n 's/.*wall_ms=\([0-9]*\).*/\1/p')
    whole_ms=$(grep "slot report epoch=$epoch .*workers_reported=2 " "$work/master-$i.log" | head -n 1 | sed -n 's/.*wall_ms=\([0-9]*\).*/\1/p')
  fi
done
if [ -n "${granted_ms:-}" ] && [ -n "${whole_ms:-}" ]; then
  step "The slot table was whole again $((whole_ms - granted_ms)) ms after the new leader's grant."
fi
say "\$ regentctl workers"
ctl workers
say "\$ regentctl slots   (the same workers and slots as before the kill)"
ctl slots > "$work/slots-after.txt"
cat "$work/slots-after.txt"
if diff -q "$work/slots-before.txt" "$work/slots-after.txt" >/dev/null; then
  step "Identical to the table before the kill."
else
  step "The table differs from the one before the kill:"
  diff "$work/slots-before.txt" "$work/slots-after.txt" | sed 's/^/    /' || true
fi

say "\$ regentctl failover   (asks the leader to hand over, without stopping it)"
ctl failover
leader=$(wait_for_leader_after "$epoch")
epoch=$(json_field epoch <<<"$leader")
leader_pid=$(json_field pid <<<"$leader")
say "\$ regentctl jobs list"
ctl jobs list

say "Stopping the new leader (pid $leader_pid) with SIGTERM: it hands over on purpose."
term_at=$(now_ms)
kill -TERM "$leader_pid"
leader=$(wait_for_leader_after "$epoch")
step "The last standby was elected $(($(json_field elected_at_ms <<<"$leader") - term_at)) ms after the SIGTERM: no session timeout to wait for."
code=0
wait "$leader_pid" || code=$?
step "The old leader exited with code $code. What it logged:"
for i in 1 2 3; do
  if grep -q "pid=$leader_pid " "$work/master-$i.log"; then
    grep -E 'leadership revoked|handover|master exiting' "$work/master-$i.log" | sed 's/^/    /'
  fi
done
say "\$ regentctl leader"
ctl leader

say "\$ regentctl jobs list"
ctl jobs list

say "\$ regentctl workers   (the workers followed every leader)"
ctl workers

say "Done: one leader at a time, a crash survived, two hand-overs, the jobs listed by every leader, and the workers' slots rebuilt by each. Stopping everything the demo started."
