#!/usr/bin/env bash
# The failover demo in containers (docs/docker.md): builds the images, starts docker-compose.yml
# (a three-server ZooKeeper ensemble, three masters, two workers), submits a job with regentctl
# run in a container, shows masters, workers and jobs, kills one ZooKeeper server (nothing
# changes: the quorum holds), kills the leader's container (a standby leads with the next epoch,
# the job is still listed and its tasks still run, same attempts), starts the killed master
# again (it rejoins as a standby), then removes everything it created (`down -v`, the secrets).
#
#   scripts/compose-demo.sh              against the Docker daemon you have (docker-compose, or
#                                        the `docker compose` plugin)
#   scripts/compose-demo.sh --isolated   as root on a machine without a Docker daemon or
#                                        registry access: starts a private dockerd in a network
#                                        namespace of its own, makes the base images with
#                                        debootstrap, runs the demo, then stops the daemon and
#                                        removes the namespace. Its images stay cached in
#                                        /var/cache/regent-compose (or --cache DIR) for the
#                                        next run; --purge-cache removes that directory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

usage() {
  echo "usage: scripts/compose-demo.sh [--isolated [--cache DIR]] | --purge-cache [--cache DIR]" >&2
  exit 2
}
isolated=0
purge=0
cache=/var/cache/regent-compose
while [ $# -gt 0 ]; do
  case "$1" in
    --isolated) isolated=1 ;;
    --purge-cache) purge=1 ;;
    --cache) [ $# -ge 2 ] || usage; cache=$2; shift ;;
    *) usage ;;
  esac
  shift
done

say() { printf '\n%s\n' "$*"; }
step() { printf '  %s\n' "$*"; }
die() { echo "compose-demo: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
started_ms=$(now_ms)

if [ "$purge" = 1 ]; then
  [ "$isolated" = 0 ] || usage
  [ -d "$cache" ] || { echo "compose-demo: no cache at $cache"; exit 0; }
  [ -e "$cache/.regent-compose-cache" ] || die "$cache is not a cache this script made; not removing it"
  rm -rf "$cache"
  echo "compose-demo: removed $cache"
  exit 0
fi

# --- What it needs -----------------------------------------------------------------------------

say "Checking the Debian packages regent needs (installs the missing ones)."
scripts/install-deps.sh
if [ "$isolated" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || die "--isolated starts dockerd in a network namespace: run it as root"
  missing=()
  packages=(docker.io docker-compose debootstrap iproute2 util-linux python3)
  # dockerd confines containers with AppArmor when the kernel has it on, and needs its parser.
  [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] && packages+=(apparmor)
  for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # Installing docker.io must not start its daemon here, in the machine's own network
    # namespace (it would create docker0 and its addresses): a policy-rc.d that refuses every
    # service start, for the length of the install, unless one is in place already.
    say "Installing ${missing[*]}, with service starts refused (policy-rc.d): no daemon starts in this namespace."
    before_install=$(ip -br addr 2>/dev/null; ip route 2>/dev/null)
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\n# compose-demo.sh: no service starts while it installs docker.io\nexit 101\n' >"$policy"
      chmod 755 "$policy"
      own_policy=1
    fi
    install_status=0
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; }
    } || install_status=$?
    if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi
    [ "$install_status" = 0 ] || die "apt-get install ${missing[*]} failed"
    [ "$(ip -br addr 2>/dev/null; ip route 2>/dev/null)" = "$before_install" ] ||
      die "installing ${missing[*]} changed this machine's interfaces (a Docker daemon started?): check ip -br addr"
  fi
fi
# Debian's docker.io puts its client in /usr/bin; a newer one earlier in PATH works too.
command -v docker >/dev/null || die "no docker client: install Docker (Debian: apt-get install docker.io)"
if command -v docker-compose >/dev/null; then
  compose_cmd=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
else
  die "neither docker-compose nor the docker compose plugin: install one (Debian: apt-get install docker-compose)"
fi

say "Building the release binaries the image copies (quick when already built)."
build_started=$(now_ms)
scripts/build.sh --release regent-master regent-worker regent-task-shim regentctl
step "Release binaries ready in $((($(now_ms) - build_started) / 1000)) s."

# --- Cleanup -----------------------------------------------------------------------------------

project=regent-demo
# docker-compose 1.x builds through the docker client unless told not to; its own builder is
# quieter (no "legacy builder is deprecated" notes from newer clients).
export COMPOSE_DOCKER_CLI_BUILD=0
compose() { "${compose_cmd[@]}" -p "$project" -f "$repo/docker-compose.yml" "$@"; }
work=$(mktemp -d -t regent-compose-XXXXXX)
netns=""
dockerd_pid=""
dns_pid=""
composed=0
made_secrets=0
addresses_before=""

stop_dockerd() {
  [ -n "$dockerd_pid" ] || return 0
  kill -TERM "$dockerd_pid" 2>/dev/null || true
  # dockerd stops its containerd and waits for its containers; 30 s, then SIGKILL.
  for _ in $(seq 300); do
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$dockerd_pid" 2>/dev/null || true
  wait "$dockerd_pid" 2>/dev/null || true
  # Anything dockerd left mounted under its directories (after a SIGKILL) is unmounted.
  findmnt -rn -o TARGET | grep -E "^($cache/docker|$work)/" | sort -r |
    while read -r target; do umount -l "$target" 2>/dev/null; done
  dockerd_pid=""
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  set +e +o pipefail
  if [ "$composed" = 1 ] && [ "$status" != 0 ]; then
    echo "compose-demo: failed; the last lines of each container's log:" >&2
    compose logs --no-color --tail 30 >&2
  fi
  if [ "$composed" = 1 ]; then
    say "Removing the containers, the network and the volumes (docker-compose down -v)."
    compose down -v --remove-orphans --timeout 10 2>&1 | sed 's/^/  /' || true
  fi
  if [ "$made_secrets" = 1 ]; then rm -rf "$repo/docker/secrets"; fi
  if [ "$isolated" = 1 ]; then
    stop_dockerd
    [ -n "$dns_pid" ] && { kill -TERM "$dns_pid" 2>/dev/null; wait "$dns_pid" 2>/dev/null; }
    if [ -n "$netns" ]; then
      # Whatever still runs in the namespace (nothing, once dockerd stopped its containers) is
      # named and killed, so nothing outlives the demo.
      local left
      left=$(ip netns pids "$netns" 2>/dev/null | tr '\n' ' ')
      if [ -n "$left" ]; then
        echo "compose-demo: still running in $netns, killed: $left" >&2
        kill -KILL $left 2>/dev/null
        [ "$status" = 0 ] && status=1
      fi
      ip netns del "$netns" 2>/dev/null
    fi
    local after
    after=$(ip -br addr; ip route)
    if [ "$after" = "$addresses_before" ]; then
      step "The machine's interfaces, addresses and routes are as before (ip -br addr, ip route)."
    else
      echo "compose-demo: the machine's interfaces, addresses or routes changed:" >&2
      diff <(printf '%s\n' "$addresses_before") <(printf '%s\n' "$after") >&2 || true
      [ "$status" = 0 ] && status=1
    fi
  fi
  rm -rf "$work"
  if [ "$status" = 0 ]; then
    say "Done in $((($(now_ms) - started_ms) / 1000)) s; nothing the demo started is left running."
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- The private daemon (--isolated) -------------------------------------------------------------

if [ "$isolated" = 1 ]; then
  addresses_before=$(ip -br addr; ip route)
  mkdir -p "$cache/docker" && touch "$cache/.regent-compose-cache"
  # One daemon per data root: a second run waits for nothing, it stops here.
  exec 9>"$cache/.lock"
  flock -n 9 || die "another scripts/compose-demo.sh --isolated is using $cache"
  netns=regent-compose-$$
  say "Starting a private dockerd in network namespace $netns (its bridges and container addresses exist only there)."
  ip netns add "$netns"
  ip netns exec "$netns" ip link set lo up
  # The containers' DNS: docker's embedded server answers the compose services' names and sends
  # every other name upstream. No upstream is reachable from the namespace, so each such lookup
  # (a ZooKeeper server's name while its container is down, say) would take glibc's 20 s of
  # retries, where a real network answers "no such name" at once. This stand-in upstream, on an
  # address that exists only in the namespace, gives that answer to every query.
  dns_address=198.18.0.53
  ip netns exec "$netns" ip addr add "$dns_address/32" dev lo
  nsenter --net="/var/run/netns/$netns" python3 -c '
import socket, sys
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind((sys.argv[1], 53))
while True:
    query, peer = server.recvfrom(4096)
    if len(query) >= 12:  # the same id and question; a response, NXDOMAIN, no records
        server.sendto(query[:2] + bytes([0x80 | (query[2] & 1), 0x83]) + query[4:6] + bytes(6) + query[12:], peer)
' "$dns_address" >"$work/dns.log" 2>&1 &
  dns_pid=$!
  # nsenter, not `ip netns exec`: the latter remounts /sys, and dockerd then finds no cgroups.
  nsenter --net="/var/run/netns/$netns" dockerd --data-root "$cache/docker" --dns "$dns_address" \
    --exec-root "$work/exec" -H "unix://$work/docker.sock" --pidfile "$work/dockerd.pid" \
    >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  export DOCKER_HOST="unix://$work/docker.sock"
  for _ in $(seq 600); do
    docker version >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { tail -n 20 "$work/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.1
  done
  docker version >/dev/null 2>&1 || { tail -n 20 "$work/dockerd.log" >&2; die "dockerd did not answer within 60 s"; }
  step "dockerd pid $dockerd_pid, socket $work/docker.sock, images in $cache/docker."

  # Base images: Debian 12 made with debootstrap from the mirror the machine reaches, holding
  # the packages the Dockerfiles would otherwise apt-get (nothing in the namespace reaches a
  # network). Made once; later runs find them in the cache.
  make_base() { # tag, packages (comma-separated)
    if docker image inspect "$1" >/dev/null 2>&1; then
      step "base image $1: cached."
      return 0
    fi
    step "base image $1: debootstrap bookworm (minbase + $2), then docker import."
    local root="$work/rootfs"
    rm -rf "$root"
    debootstrap --variant=minbase --include="$2" bookworm "$root" http://deb.debian.org/debian \
      >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - "$1" >/dev/null
    rm -rf "$root"
  }
  say "Preparing the base images."
  bases_started=$(now_ms)
  make_base regent-base:bookworm \
    libcapnp-0.9.2,libfmt9,librocksdb7.8,libspdlog1.10,libssl3,libuv1,libyaml-cpp0.7,libzookeeper-st2
  make_base regent-zookeeper-base:bookworm zookeeper,default-jre-headless
  step "Base images ready in $((($(now_ms) - bases_started) / 1000)) s."
  export BASE_IMAGE=regent-base:bookworm ZOOKEEPER_BASE_IMAGE=regent-zookeeper-base:bookworm
fi

# --- Images, secrets, up -------------------------------------------------------------------------

# The image's user must read the secret files: uid 10001 (make-secrets gives them to it) as
# root, otherwise the caller's own uid.
if [ "$(id -u)" -eq 0 ]; then export USER_ID=10001; else export USER_ID; USER_ID=$(id -u); fi
if [ ! -d docker/secrets ]; then made_secrets=1; fi
say "Making the RPC role secrets (docker/make-secrets.sh): admin, reader, worker."
docker/make-secrets.sh | sed 's/^/  /'

say "Building the images regent:compose and regent-zookeeper:compose (docker-compose build)."
build_started=$(now_ms)
compose build --quiet 2>&1 | sed 's/^/  /'
step "Built in $((($(now_ms) - build_started) / 1000)) s."

say "Starting the ensemble, the masters and the workers (docker-compose up -d): masters wait for a healthy ZooKeeper, workers for healthy masters."
composed=1
up_started=$(now_ms)
compose up -d 2>&1 | sed 's/^/  /'

# Polls (at most $1 s) until every container of the project is healthy.
wait_for_health() {
  local ids id health unhealthy
  for _ in $(seq $(($1 * 2))); do
    unhealthy=0
    ids=$(compose ps -q)
    for id in $ids; do
      health=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
      [ "$health" = healthy ] || unhealthy=1
    done
    [ -n "$ids" ] && [ "$unhealthy" = 0 ] && return 0
    sleep 0.5
  done
  compose ps >&2
  die "not every container was healthy within $1 s"
}
wait_for_health 120
step "All $(compose ps -q | wc -l) containers healthy $((($(now_ms) - up_started) / 1000)) s after up."
compose ps | sed 's/^/  /'
# master-1's HTTP port is published on the host's loopback (inside the namespace, --isolated).
in_host_net() {
  if [ "$isolated" = 1 ]; then nsenter --net="/var/run/netns/$netns" "$@"; else "$@"; fi
}
step "master-1's HTTP port, published on 127.0.0.1:8081: GET /healthz answers $(in_host_net docker/regent-healthcheck 127.0.0.1:8081)."

# --- regentctl in a container ----------------------------------------------------------------------

# `compose run` notes each container it creates on stderr; regentctl's own errors are kept.
ctl() {
  local status=0
  compose run --rm -T regentctl "$@" 2>"$work/ctl.err" || status=$?
  grep -v -e '^Creating .*_run' -e '^ *$' -e '^\[+\]' -e 'Container .* Creat' "$work/ctl.err" >&2 || true
  return "$status"
}
json_field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
container_of() { compose ps -q "$1"; }

# Polls `regentctl leader` (at most 60 s) until a leader with an epoch above $1 serves; prints
# its JSON line.
wait_for_leader_after() {
  local line epoch
  for _ in $(seq 120); do
    if line=$(ctl --json leader 2>/dev/null); then
      epoch=$(json_field epoch <<<"$line")
      if [ "${epoch:-0}" -gt "$1" ] && [ "$(json_field status <<<"$line")" = SERVING ]; then
        printf '%s\n' "$line"
        return 0
      fi
    fi
    sleep 0.5
  done
  die "no leader with an epoch above $1 within 60 s"
}

leader=$(wait_for_leader_after 0)
epoch=$(json_field epoch <<<"$leader")
say "\$ regentctl masters   (run as: docker-compose run --rm regentctl masters)"
ctl masters
say "\$ regentctl leader"
ctl leader

for _ in $(seq 60); do
  [ "$(ctl --json workers 2>/dev/null | grep -c '"resource_id"')" -ge 2 ] && break
  sleep 0.5
done
say "\$ regentctl workers   (each worker container registered its 4 slots with the leader)"
ctl workers

say "Submitting a job: two tasks that print a number every second until cancelled."
job=$(ctl jobs submit - <<'YAML'
name: ticker
vertices:
  - name: tick
    parallelism: 2
    command:
      argv: [sh, -c, 'i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 1; done']
    resources: {cpu: 0.5, memory: 64MiB}
YAML
)
step "\$ regentctl jobs submit -   ->   $job"
attempts() { ctl --json jobs status "$job" | grep -o '"attempt_id":"[0-9a-f]*"\|"pid":[0-9]*' | sed 's/.*://; s/"//g' | paste -d' ' - -; }
for _ in $(seq 60); do
  [ "$(attempts | awk '$2 > 0' | wc -l)" -eq 2 ] && break
  sleep 0.5
done
[ "$(attempts | awk '$2 > 0' | wc -l)" -eq 2 ] || die "the job's two tasks did not start within 30 s"
attempts >"$work/attempts-before"
say "\$ regentctl jobs list"
ctl jobs list
say "\$ regentctl jobs status $job"
ctl jobs status "$job"

# --- One ZooKeeper server killed -------------------------------------------------------------------

follower=""
for zk in zk-1 zk-2 zk-3; do
  if [ "$(docker exec "$(container_of "$zk")" zookeeper-server --check 2>/dev/null)" = follower ]; then
    follower=$zk
    break
  fi
done
[ -n "$follower" ] || die "no ZooKeeper server reports itself a follower"
say "Killing ZooKeeper server $follower (a follower; two of three still make a quorum): docker kill."
killed_ms=$(now_ms)
docker kill "$(container_of "$follower")" >/dev/null
# Watches the leader for 8 s, twice the masters' session timeout: a session on the killed server
# that failed to move to another would have expired by then, and the leader changed.
checks=0
while [ $(($(now_ms) - killed_ms)) -lt 8000 ]; do
  line=$(ctl --json leader) || die "regentctl leader failed after killing $follower"
  [ "$(json_field epoch <<<"$line")" = "$epoch" ] && [ "$(json_field status <<<"$line")" = SERVING ] ||
    die "the leader changed after killing $follower: $line"
  checks=$((checks + 1))
done
say "\$ regentctl leader   (the same leader, the same epoch $epoch, in all $checks checks over 8 s)"
ctl leader
say "\$ regentctl jobs list"
ctl jobs list
say "Starting $follower again (docker start): it rejoins the ensemble."
docker start "$(container_of "$follower")" >/dev/null
wait_for_health 60

# --- The leader's container killed -----------------------------------------------------------------

leader_service=$(json_field rpc_address <<<"$leader")
leader_service=${leader_service%%:*}
say "Killing the leader's container: docker kill $leader_service (epoch $epoch)."
killed_ms=$(now_ms)
docker kill "$(container_of "$leader_service")" >/dev/null
new_leader=$(wait_for_leader_after "$epoch")
new_epoch=$(json_field epoch <<<"$new_leader")
step "A standby leads with epoch $new_epoch, $((($(now_ms) - killed_ms) / 1000)) s after the kill (the killed master's ZooKeeper session expires after its 4 s timeout first)."
say "\$ regentctl leader"
ctl leader
say "\$ regentctl masters"
ctl masters
say "\$ regentctl workers   (both workers registered again with the new leader, their slots as before)"
ctl workers
say "\$ regentctl jobs list   (the new leader recovered the job from ZooKeeper)"
ctl jobs list
for _ in $(seq 60); do
  attempts >"$work/attempts-after"
  [ "$(awk '$2 > 0' "$work/attempts-after" | wc -l)" -eq 2 ] && break
  sleep 0.5
done
say "\$ regentctl jobs status $job"
ctl jobs status "$job"
if diff -q "$work/attempts-before" "$work/attempts-after" >/dev/null; then
  step "The job's tasks still run: the same attempts in the same processes (attempt id, pid):"
else
  die "the job's attempts changed across the failover: $(cat "$work/attempts-before") -> $(cat "$work/attempts-after")"
fi
sed 's/^/    /' "$work/attempts-after"
# Each task's user, read from /proc in the worker container that runs it (the HOST column of
# `jobs status` is that container's host name, its id).
# (Each subtask's attempt, with its pid, comes before its host: the JSON keys are sorted.)
ctl --json jobs status "$job" | grep -o '"pid":[0-9]*\|"host":"[0-9a-f]*"' | sed 's/.*://; s/"//g' | paste -d' ' - - |
  while read -r pid host; do
    step "pid $pid runs in worker container $host as user $(docker exec "$host" stat -c %U "/proc/$pid")."
  done
say "\$ regentctl jobs logs $job --vertex tick | tail -n 3   (the ticks go on)"
ctl jobs logs "$job" --vertex tick | tail -n 3

say "Starting the killed master again (docker start $leader_service): it joins as a standby."
docker start "$(container_of "$leader_service")" >/dev/null
wait_for_health 60
say "\$ regentctl masters"
ctl masters

say "\$ regentctl jobs cancel $job"
ctl jobs cancel "$job"
