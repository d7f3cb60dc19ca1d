#!/usr/bin/env bash
# The local demo (README command one): a ZooKeeper server on loopback, three regent masters
# electing a leader, two workers registering their slots, jobs run on them (a DAG whose output
# `regentctl jobs logs` shows, a flaky task restarted by its strategy, long-running jobs and a
# counter), the leader killed and replaced (the jobs still listed, their running tasks adopted:
# same attempts, same processes; the slot table rebuilt from the workers' reports), `regentctl
# failover`, a graceful hand-over, the counter stopped and finished, then a cancel. Everything it
# starts is stopped, and its temporary directory removed, when it ends (even on Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."

# say, step, now_ms, json_field, wait_for_leader_after
source scripts/lib/demo-common.sh

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
  # Workers, then masters (SIGTERM: workers stop their tasks and disconnect, masters hand over,
  # all exit), then ZooKeeper; SIGKILL for whatever is still running after 5 s. The shell's "Killed" notes are
  # not news here.
  {
    local pid
    # Workers first, while a leader still takes their tasks' last updates and their goodbye.
    for pid in "${worker_pids[@]}"; do kill -TERM "$pid" || true; done
    for _ in $(seq 100); do
      local alive=0
      for pid in "${worker_pids[@]}"; do kill -0 "$pid" && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    for pid in "${master_pids[@]}"; do kill -TERM "$pid" || true; done
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
ctl slots

# Tasks run as an unprivileged user (worker.task-user, `nobody` by default) when the demo runs as
# root: they must be able to enter the demo's directory to reach their own under the workers'
# data directories, and the jobs below share files through $shared.
chmod 755 "$work"
shared="$work/shared"
mkdir -p "$shared"
chmod 1777 "$shared"

# The state of job $1 as `regentctl jobs list` shows it (empty when not listed).
job_state() { ctl --json jobs list 2>/dev/null | grep "\"$1\"" | json_field state; }
# Polls (at most $3 s) until job $1 is in state $2.
wait_for_job() {
  for _ in $(seq $(($3 * 5))); do
    [ "$(job_state "$1")" = "$2" ] && return 0
    sleep 0.2
  done
  echo "demo: job $1 is $(job_state "$1"), not $2, after $3 s" >&2
  return 1
}

say "Running a small DAG: split (2 subtasks) -> count (2) -> sum (1). Each vertex starts only after every subtask upstream finished; the workers run the commands, as user nobody when the demo runs as root."
cat >"$work/sum.yaml" <<YAML
name: sum-of-1-to-1000
vertices:
  - name: split
    parallelism: 2
    command:
      argv: [/bin/sh, -c, 'seq 1 1000 | awk -v i="\$REGENT_TASK_SUBTASK_INDEX" "NR % 2 == i" > "$shared/part-\$REGENT_TASK_SUBTASK_INDEX"; echo "split \$REGENT_TASK_SUBTASK_INDEX wrote \$(wc -l < "$shared/part-\$REGENT_TASK_SUBTASK_INDEX") numbers"']
    resources: {cpu: 0.5, memory: 64MiB}
  - name: count
    parallelism: 2
    command:
      argv: [/bin/sh, -c, 'awk "{ s += \\\$1 } END { print s }" "$shared/part-\$REGENT_TASK_SUBTASK_INDEX" > "$shared/sum-\$REGENT_TASK_SUBTASK_INDEX"; echo "count \$REGENT_TASK_SUBTASK_INDEX: \$(cat "$shared/sum-\$REGENT_TASK_SUBTASK_INDEX")"']
    resources: {cpu: 0.5, memory: 64MiB}
    upstream: [split]
  - name: sum
    command:
      argv: [/bin/sh, -c, 'echo "sum of 1..1000 = \$((\$(cat "$shared"/sum-* | paste -sd+)))"']
    resources: {cpu: 0.5, memory: 64MiB}
    upstream: [count]
YAML
sum_job=$(ctl jobs submit "$work/sum.yaml")
step "\$ regentctl jobs submit sum.yaml   ->   $sum_job"
wait_for_job "$sum_job" FINISHED 60
say "\$ regentctl jobs status $sum_job"
ctl jobs status "$sum_job"
say "\$ regentctl jobs logs $sum_job --vertex sum   (the output, read from the worker that ran it)"
ctl jobs logs "$sum_job" --vertex sum

say "A flaky job: its one task fails twice (exit 1), then succeeds. Its fixed-delay restart strategy allows 3 restarts."
cat >"$work/flaky.yaml" <<YAML
name: flaky
vertices:
  - name: try
    command:
      argv: [/bin/sh, -c, 'n=\$((\$(cat "$shared/tries" 2>/dev/null || echo 0) + 1)); echo \$n > "$shared/tries"; echo "try \$n"; [ \$n -ge 3 ]']
    resources: {cpu: 0.5, memory: 64MiB}
restart_strategy:
  type: fixed-delay
  attempts: 3
  delay: 500ms
YAML
flaky_job=$(ctl jobs submit "$work/flaky.yaml")
step "\$ regentctl jobs submit flaky.yaml   ->   $flaky_job"
wait_for_job "$flaky_job" FINISHED 60
say "\$ regentctl jobs status $flaky_job   (two restarts, the last failure kept)"
ctl jobs status "$flaky_job"

say "Submitting three long-running jobs (extract: 2 subtasks sleeping 60 s, then load). They hold slots through the failovers below."
long_jobs=()
for name in wordcount etl-nightly report; do
  cat >"$work/$name.yaml" <<YAML
name: $name
vertices:
  - name: extract
    parallelism: 2
    command:
      argv: [sleep, "60"]
    resources: {cpu: 0.5, memory: 64MiB}
  - name: load
    parallelism: 1
    command:
      argv: [sleep, "2"]
    resources: {cpu: 0.5, memory: 64MiB}
    upstream: [extract]
YAML
  id=$(ctl jobs submit "$work/$name.yaml")
  long_jobs+=("$id")
  step "\$ regentctl jobs submit $name.yaml   ->   $id"
done

say "And a job that counts: two tasks, each printing the next number every half second until a stop file appears. Its processes keep running through every failover below."
cat >"$work/counter.yaml" <<YAML
name: counter
vertices:
  - name: count
    parallelism: 2
    command:
      argv: [sh, -c, 'i=0; while [ ! -e "\$0" ]; do i=\$((i+1)); echo "count \$i"; sleep 0.5; done; echo "stopped at \$i"', "$shared/counter-stop"]
    resources: {cpu: 0.5, memory: 64MiB}
YAML
counter_job=$(ctl jobs submit "$work/counter.yaml")
step "\$ regentctl jobs submit counter.yaml   ->   $counter_job"
for id in "${long_jobs[@]}" "$counter_job"; do wait_for_job "$id" RUNNING 30; done
# Until every extract and count subtask holds its slot (8 allocated), so the table is settled.
for _ in $(seq 150); do
  [ "$(ctl --json slots 2>/dev/null | grep -c '"ALLOCATED"')" -ge 8 ] && break
  sleep 0.2
done
# The counter's attempts as "attempt-id pid" lines, one per running subtask.
counter_attempts() {
  ctl --json jobs status "$counter_job" | grep -o '"attempt_id":"[0-9a-f]*"\|"pid":[0-9]*' | sed 's/.*://; s/"//g' | paste -d' ' - -
}
# Polls (at most 30 s) until both count tasks run.
for _ in $(seq 150); do
  [ "$(counter_attempts | awk '$2 > 0' | wc -l)" -eq 2 ] && break
  sleep 0.2
done
counter_attempts >"$work/counter-before.txt"
step "The counter's attempts (attempt id, pid):"
sed 's/^/    /' "$work/counter-before.txt"
# Prints whether the counter still runs the same attempts in the same processes.
same_counter() {
  counter_attempts >"$work/counter-now.txt"
  if diff -q "$work/counter-before.txt" "$work/counter-now.txt" >/dev/null; then
    step "The counter runs the same attempts in the same processes:"
  else
    step "The counter's attempts changed:"
  fi
  sed 's/^/    /' "$work/counter-now.txt"
  while read -r _ pid; do
    kill -0 "$pid" 2>/dev/null && step "pid $pid is alive." || step "pid $pid is gone."
  done <"$work/counter-now.txt"
}
# The "job reconciled" event line the leader of epoch $1 logged for the counter job (polls at
# most 10 s for it).
show_reconciled() {
  local i line
  for _ in $(seq 50); do
    for i in 1 2 3; do
      # The lines after that leader's grant in its log.
      line=$(sed -n "/leadership granted epoch=$1 /,\$p" "$work/master-$i.log" | grep "job reconciled job=$counter_job " | head -n 1 || true)
      if [ -n "$line" ]; then
        sed 's/^.*\(job reconciled\)/    \1/' <<<"$line"
        return 0
      fi
    done
    sleep 0.2
  done
  step "(no job reconciled line from the leader of epoch $1)"
}
say "\$ regentctl jobs list"
ctl jobs list
say "\$ regentctl slots"
ctl slots > "$work/slots-before.txt"
cat "$work/slots-before.txt"

say "Killing the leader (pid $leader_pid) with SIGKILL: no goodbye."
killed_at=$(now_ms)
kill -KILL "$leader_pid"
wait "$leader_pid" 2>/dev/null || true
step "Its host stays up, so its RPC port now refuses connections: the next standby in line removes its nodes without waiting for the 4 s session timeout (ha.fast-failover). Had the machine died, the session timeout would decide."
leader=$(wait_for_leader_after "$epoch")
step "A new leader was elected $(($(json_field elected_at_ms <<<"$leader") - killed_at)) ms after the kill (its elected-at time in ZooKeeper)."
epoch=$(json_field epoch <<<"$leader")
leader_pid=$(json_field pid <<<"$leader")
say "\$ regentctl leader"
ctl leader
step "The epoch went up by one, to $epoch."
for id in "${long_jobs[@]}"; do wait_for_job "$id" RUNNING 30; done
say "\$ regentctl jobs list   (the new leader recovered every job from ZooKeeper)"
ctl jobs list
step "The ended jobs keep their results. Each unfinished job got a new JobMaster, which read what the last one had done (its progress record) and adopted the attempts the workers offered with their slots: nothing was restarted."
show_reconciled "$epoch"
same_counter

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
for id in "${long_jobs[@]}"; do wait_for_job "$id" RUNNING 30; done
say "\$ regentctl jobs list"
ctl jobs list
show_reconciled "$epoch"
same_counter

say "Stopping the new leader (pid $leader_pid) with SIGTERM: it hands over on purpose."
term_at=$(now_ms)
kill -TERM "$leader_pid"
leader=$(wait_for_leader_after "$epoch")
step "The last standby was elected $(($(json_field elected_at_ms <<<"$leader") - term_at)) ms after the SIGTERM: no session timeout to wait for."
epoch=$(json_field epoch <<<"$leader")
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

for id in "${long_jobs[@]}"; do wait_for_job "$id" RUNNING 30; done
say "\$ regentctl jobs list"
ctl jobs list
show_reconciled "$epoch"
same_counter

say "\$ regentctl workers   (the workers followed every leader)"
ctl workers

say "Creating the counter's stop file: its tasks print where they stopped and exit 0."
touch "$shared/counter-stop"
wait_for_job "$counter_job" FINISHED 30
say "\$ regentctl jobs logs $counter_job --vertex count --subtask 0 | tail -n 3   (one process counted through three leaders)"
ctl jobs logs "$counter_job" --vertex count --subtask 0 | tail -n 3
say "\$ regentctl jobs status $counter_job"
ctl jobs status "$counter_job"

say "\$ regentctl jobs cancel ${long_jobs[0]}   (its processes are stopped on the workers: SIGTERM to each task's process group)"
# Only the lines logged after the cancel count.
canceled_lines() { cat "$work"/worker-*.log | grep "task ended .*job=${long_jobs[0]} .*state=CANCELED" || true; }
before=$(canceled_lines | wc -l)
ctl jobs cancel "${long_jobs[0]}"
wait_for_job "${long_jobs[0]}" CANCELED 30
# The cancel returns once the CANCELED result is stored; the workers then stop the tasks.
for _ in $(seq 100); do
  [ "$(canceled_lines | wc -l)" -ge $((before + 2)) ] && break
  sleep 0.2
done
step "What the workers logged for its two running tasks:"
canceled_lines | tail -n +$((before + 1)) | sed 's/^/    /'
say "\$ regentctl jobs list"
ctl jobs list

say "Done: jobs run on the workers (a DAG in order, a flaky task restarted by its strategy), one leader at a time, a crash survived, two hand-overs, the running tasks adopted by every leader (same processes, nothing restarted), the workers' slots rebuilt by each, and a cancel that stopped a job's processes. Stopping everything the demo started."
