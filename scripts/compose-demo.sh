#!/usr/bin/env bash
# The failover demo in containers (docs/docker.md): builds the images, starts docker-compose.yml
# (a three-server ZooKeeper ensemble, three masters, two workers), submits a job with regentctl
# run in a container, shows masters, workers and jobs, kills one ZooKeeper server (nothing
# changes: the quorum holds), kills the leader's container (a standby leads with the next epoch,
# the job is still listed and its tasks still run, same attempts), starts the killed master
# again (it rejoins as a standby), then removes everything it created (`down -v`, the secrets).
#
#   scripts/compose-demo.sh              against the Docker daemon you have (the `docker
#                                        compose` plugin, or Debian's docker-compose 1.29)
#   scripts/compose-demo.sh --isolated [--cache DIR] [--mirror URL]
#                                        as root on a machine without a Docker daemon or
#                                        registry access: starts a private dockerd in a network
#                                        namespace of its own, makes the base images with
#                                        debootstrap from URL (default deb.debian.org), runs the
#                                        demo, then stops the daemon and removes the namespace.
#                                        Its images stay cached in /var/cache/regent-compose (or
#                                        DIR) for the next run.
#   scripts/compose-demo.sh --purge-cache [--cache DIR]   removes that cache.
#   --provider docker (with either form): the masters start the workers themselves, as
#                                        containers of the same daemon, for the slots the job
#                                        needs (docker-compose.provider.yml: no worker service);
#                                        the demo shows them appear, survive the leader's kill
#                                        with their tasks, and go once idle.
set -euo pipefail

usage() {
  echo "usage: scripts/compose-demo.sh [--isolated [--cache DIR] [--mirror URL]] [--provider docker]" >&2
  echo "       scripts/compose-demo.sh --purge-cache [--cache DIR]" >&2
  exit 2
}
isolated=0
purge=0
cache=/var/cache/regent-compose
cache_given=0
mirror=http://deb.debian.org/debian
mirror_given=0
provider=""
while [ $# -gt 0 ]; do
  case "$1" in
    --isolated) isolated=1 ;;
    --purge-cache) purge=1 ;;
    # Relative to where the script was started, before it changes directory.
    --cache) [ $# -ge 2 ] || usage; cache=$(realpath -m -- "$2"); cache_given=1; shift ;;
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; mirror_given=1; shift ;;
    --provider) [ $# -ge 2 ] && [ "$2" = docker ] || usage; provider=docker; shift ;;
    *) usage ;;
  esac
  shift
done
[ "$isolated" = 1 ] && [ "$purge" = 1 ] && usage
[ "$cache_given" = 1 ] && [ "$isolated" = 0 ] && [ "$purge" = 0 ] && usage
[ "$mirror_given" = 1 ] && [ "$isolated" = 0 ] && usage
[ -n "$provider" ] && [ "$purge" = 1 ] && usage
cd "$(dirname "$0")/.."
repo=$PWD

# say, step, now_ms, json_field, wait_for_leader_after
source scripts/lib/demo-common.sh
die() { echo "compose-demo: $*" >&2; exit 1; }
started_ms=$(now_ms)
if [ "$isolated" = 1 ] || [ "$purge" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || die "--isolated and --purge-cache need root (network namespaces, dockerd)"
fi

# Takes the cache's lock (fd 9; dockerd inherits it, so the lock lasts as long as the daemon).
lock_cache() {
  mkdir -p "$cache" && touch "$cache/.regent-compose-cache"
  exec 9>"$cache/.lock"
  flock -n 9 || die "another scripts/compose-demo.sh --isolated, or a dockerd a killed one left (pgrep -af 'dockerd --data-root $cache/docker'), is using $cache"
}

if [ "$purge" = 1 ]; then
  [ -d "$cache" ] || { echo "compose-demo: no cache at $cache"; exit 0; }
  [ -e "$cache/.regent-compose-cache" ] || die "$cache is not a cache this script made; not removing it"
  lock_cache
  rm -rf "$cache"
  echo "compose-demo: removed $cache"
  exit 0
fi

# --- Cleanup, armed before anything is changed -----------------------------------------------------

project=regent-demo
work=$(mktemp -d -t regent-compose-XXXXXX)
netns=""
dockerd_pid=""
dns_pid=""
policy_file=""
composed=0
made_secrets=0
host_network_before=""
container_pids=()

# The machine's own network state, compared before and after an isolated run.
# (Routes learnt from router advertisements count their lifetime down: that part is left out.)
host_network() { ip -br addr; ip route; ip -6 route | sed 's/ expires [0-9]*sec//'; ip rule; }

stop_dockerd() {
  [ -n "$dockerd_pid" ] || return 0
  kill -TERM "$dockerd_pid" 2>/dev/null
  # dockerd stops its containers and its containerd; 30 s, then SIGKILL.
  for _ in $(seq 300); do
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$dockerd_pid" 2>/dev/null
  wait "$dockerd_pid" 2>/dev/null
  dockerd_pid=""
  # Anything left mounted under its directories (after a SIGKILL) or under the work directory
  # (a base image's /proc) is unmounted, deepest first.
  findmnt -rn -o TARGET | awk -v a="$cache/docker/" -v b="$work/" \
    'index($0, a) == 1 || index($0, b) == 1' | sort -r |
    while read -r target; do umount -l "$target" 2>/dev/null; done
}

cleanup() {
  local status=$?
  trap - EXIT
  # A second Ctrl-C must not cut the cleanup short.
  trap '' INT TERM
  set +e +o pipefail
  if [ -n "$policy_file" ]; then rm -f "$policy_file"; fi
  # After a failure (not an interrupt): what the containers said last.
  if [ "$composed" = 1 ] && [ "$status" != 0 ] && [ "$status" != 130 ] && [ "$status" != 143 ]; then
    echo "compose-demo: failed; the last lines of each container's log:" >&2
    compose logs --no-color --tail 30 >&2
  fi
  if [ "$composed" = 1 ]; then
    # The containers' processes, to check they are gone once the daemon stopped.
    local id pid
    for id in $(compose ps -a -q 2>/dev/null); do
      pid=$(docker inspect -f '{{.State.Pid}}' "$id" 2>/dev/null)
      [ -n "$pid" ] && [ "$pid" != 0 ] && container_pids+=("$pid")
    done
    if [ "$provider" = docker ]; then
      # The workers the masters started are no service of the project: removed by label.
      for id in $(docker ps -a -q --filter label=regent.cluster=compose 2>/dev/null); do
        pid=$(docker inspect -f '{{.State.Pid}}' "$id" 2>/dev/null)
        [ -n "$pid" ] && [ "$pid" != 0 ] && container_pids+=("$pid")
        docker rm -f "$id" >/dev/null 2>&1
      done
    fi
    say "Removing the containers, the network and the volumes (docker-compose down -v)."
    compose down -v --remove-orphans --timeout 10 2>&1 | sed 's/^/  /'
  fi
  if [ "$made_secrets" = 1 ]; then rm -rf "$repo/docker/secrets"; fi
  if [ "$isolated" = 1 ]; then
    stop_dockerd
    [ -n "$dns_pid" ] && { kill -TERM "$dns_pid" 2>/dev/null; wait "$dns_pid" 2>/dev/null; }
    local left=""
    for pid in "${container_pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+="$pid "; done
    if [ -n "$netns" ]; then
      left+=$(ip netns pids "$netns" 2>/dev/null | tr '\n' ' ')
      ip netns del "$netns" 2>/dev/null
    fi
    # Nothing, normally: whatever still runs is named, killed, and fails the run.
    if [ -n "$left" ]; then
      echo "compose-demo: still running after the daemon stopped, killed: $left" >&2
      kill -KILL $left 2>/dev/null
      [ "$status" = 0 ] && status=1
    fi
    if [ -n "$host_network_before" ]; then
      local after
      after=$(host_network)
      if [ "$after" = "$host_network_before" ]; then
        step "The machine's interfaces, addresses, routes and rules are as before (ip -br addr, ip route, ip -6 route, ip rule)."
      else
        echo "compose-demo: the machine's interfaces, addresses, routes or rules changed:" >&2
        diff <(printf '%s\n' "$host_network_before") <(printf '%s\n' "$after") >&2
        [ "$status" = 0 ] && status=1
      fi
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
# Compose v2 would print its progress on stdout, into the values the script reads.
unset COMPOSE_STATUS_STDOUT
# One isolated run per cache, from here on: its install (policy-rc.d), build and daemon.
if [ "$isolated" = 1 ]; then lock_cache; fi

# --- What it needs -----------------------------------------------------------------------------

if [ "$isolated" = 1 ]; then host_network_before=$(host_network); fi
say "Checking the Debian packages regent needs (installs the missing ones)."
scripts/install-deps.sh
if [ "$isolated" = 1 ]; then
  packages=(docker.io docker-compose debootstrap iproute2 util-linux python3)
  # dockerd confines containers with AppArmor when the kernel has it on, and needs its parser.
  [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] && packages+=(apparmor)
  installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
  had_docker=0 had_containerd=0
  installed docker.io && had_docker=1
  installed containerd && had_containerd=1
  # Installing docker.io must not start its daemon here, in the machine's own network namespace
  # (it would create docker0 and its addresses): while it installs, a policy-rc.d refuses every
  # service start (unless one is in place already; the cleanup removes ours even on Ctrl-C).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy_file=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# scripts/compose-demo.sh --isolated: no service starts while it installs\nexit 101\n' >"$policy_file"
    chmod 755 "$policy_file"
  fi
  docker/install-packages "${packages[@]}"
  if [ -n "$policy_file" ]; then rm -f "$policy_file"; policy_file=""; fi
  # Nor at the next boot: docker.io enables its units; a machine that had no Docker before
  # keeps having none in its own namespace.
  # Only the units of packages this run installed: a containerd the machine had stays as it was.
  if [ -d /run/systemd/system ]; then
    units=()
    [ "$had_docker" = 0 ] && units+=(docker.service docker.socket)
    [ "$had_containerd" = 0 ] && units+=(containerd.service)
    if [ ${#units[@]} -gt 0 ]; then
      systemctl disable --quiet "${units[@]}" 2>/dev/null || true
      step "Disabled ${units[*]}, which the install enabled: no daemon runs in this namespace, now or after a reboot."
    fi
  fi
  [ "$(host_network)" = "$host_network_before" ] ||
    die "installing ${packages[*]} changed this machine's network (a Docker daemon started?): check ip -br addr"
fi
# Debian's docker.io puts its client in /usr/bin; a newer one earlier in PATH works too.
command -v docker >/dev/null || die "no docker client: install Docker (Debian: apt-get install docker.io)"
# The compose plugin (v2) when the client has it; Debian's docker-compose 1.29 otherwise.
if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
  compose_cmd=(docker-compose)
  # 1.x builds through the docker client unless told not to; its own builder is quieter (no
  # "legacy builder is deprecated" notes from newer clients).
  export COMPOSE_DOCKER_CLI_BUILD=0
else
  die "neither the docker compose plugin nor docker-compose: install one (Debian: apt-get install docker-compose)"
fi
compose_files=(-f "$repo/docker-compose.yml")
[ "$provider" = docker ] && compose_files+=(-f "$repo/docker-compose.provider.yml")
compose() { "${compose_cmd[@]}" -p "$project" "${compose_files[@]}" "$@"; }

say "Building the release binaries the image copies (quick when already built)."
build_started=$(now_ms)
scripts/build.sh --release regent-master regent-worker regent-task-shim regentctl
step "Release binaries ready in $((($(now_ms) - build_started) / 1000)) s."

# --- The private daemon (--isolated) -------------------------------------------------------------

if [ "$isolated" = 1 ]; then
  mkdir -p "$cache/docker"
  # Namespaces of earlier runs that were killed (their pid gone, nothing inside) are removed.
  for stale in $(ip netns list | awk '$1 ~ /^regent-compose-[0-9]+$/ {print $1}'); do
    if ! kill -0 "${stale#regent-compose-}" 2>/dev/null && [ -z "$(ip netns pids "$stale")" ]; then
      ip netns del "$stale" && step "Removed network namespace $stale, left by a run that was killed."
    fi
  done
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
  # setsid: the daemons are not in the terminal's process group, so a Ctrl-C reaches only this
  # script, whose cleanup then stops them in order.
  setsid nsenter --net="/var/run/netns/$netns" python3 -c '
import socket, sys
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind((sys.argv[1], 53))
while True:
    query, peer = server.recvfrom(4096)
    if len(query) >= 12:  # the same id and question; a response, NXDOMAIN, no records
        server.sendto(query[:2] + bytes([0x80 | (query[2] & 1), 0x83]) + query[4:6] + bytes(6) + query[12:], peer)
' "$dns_address" >"$work/dns.log" 2>&1 &
  dns_pid=$!
  for _ in $(seq 100); do
    ip netns exec "$netns" ss -Hlun | grep -q "$dns_address:53 " && break
    kill -0 "$dns_pid" 2>/dev/null || break
    sleep 0.1
  done
  ip netns exec "$netns" ss -Hlun | grep -q "$dns_address:53 " ||
    { cat "$work/dns.log" >&2; die "the DNS responder is not listening on $dns_address:53"; }
  # nsenter, not `ip netns exec`: the latter remounts /sys, and dockerd then finds no cgroups.
  # Its own containerd namespaces, in case the machine runs a containerd of its own.
  setsid nsenter --net="/var/run/netns/$netns" dockerd --data-root "$cache/docker" \
    --dns "$dns_address" --exec-root "$work/exec" -H "unix://$work/docker.sock" \
    --pidfile "$work/dockerd.pid" --containerd-namespace regent-compose \
    --containerd-plugins-namespace regent-compose-plugins >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  export DOCKER_HOST="unix://$work/docker.sock"
  for _ in $(seq 600); do
    docker version >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { tail -n 20 "$work/dockerd.log" >&2; die "dockerd exited"; }
    sleep 0.1
  done
  docker version >/dev/null 2>&1 || { tail -n 20 "$work/dockerd.log" >&2; die "dockerd did not answer within 60 s"; }
  step "dockerd pid $dockerd_pid, socket $work/docker.sock, images in $cache/docker."

  # Base images: Debian 12 made with debootstrap from the mirror (the machine reaches it; nothing
  # in the namespace does), brought up to date from bookworm-updates and bookworm-security, with
  # the packages the Dockerfiles would otherwise apt-get. Made again once a week, for the
  # security updates; in between, later runs find them in the cache.
  make_base() { # tag, package list file
    local created
    if created=$(docker image inspect -f '{{.Created}}' "$1" 2>/dev/null) &&
      [ $(($(date +%s) - $(date -d "$created" +%s))) -lt $((7 * 24 * 3600)) ]; then
      step "base image $1: cached (made $created)."
      return 0
    fi
    local packages
    packages=$(sed 's/#.*//' "$2" | xargs | tr ' ' ',')
    step "base image $1: debootstrap bookworm from $mirror (minbase + $packages), security updates, docker import."
    local root="$work/rootfs"
    rm -rf "$root"
    debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" \
      >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
      "$mirror" "$mirror" >"$root/etc/apt/sources.list"
    # Java's package scripts need /proc; the cleanup unmounts it if this is cut short.
    mount -t proc proc "$root/proc"
    { chroot "$root" apt-get update -q && DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get upgrade -y -q &&
      chroot "$root" apt-get clean; } >"$work/upgrade.log" 2>&1 ||
      { umount "$root/proc"; tail -n 20 "$work/upgrade.log" >&2; die "updating $1 failed"; }
    umount "$root/proc"
    rm -rf "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - "$1" >/dev/null
    rm -rf "$root"
  }
  say "Preparing the base images."
  bases_started=$(now_ms)
  make_base regent-base:bookworm docker/packages/regent
  make_base regent-zookeeper-base:bookworm docker/packages/zookeeper
  step "Base images ready in $((($(now_ms) - bases_started) / 1000)) s."
  export BASE_IMAGE=regent-base:bookworm ZOOKEEPER_BASE_IMAGE=regent-zookeeper-base:bookworm
fi

# --- Images, secrets, up -------------------------------------------------------------------------

# The image's user must read the secret files: uid 10001 (make-secrets gives them to it) as
# root, otherwise the caller's own uid.
if [ "$(id -u)" -eq 0 ]; then export USER_ID=10001; else export USER_ID; USER_ID=$(id -u); fi
if [ ! -d docker/secrets ]; then
  made_secrets=1
elif [ -e docker/secrets/admin ]; then
  # Secrets kept from before: the image's user must be their owner.
  owner=$(stat -c %u docker/secrets/admin)
  if [ "$(id -u)" -ne 0 ] && [ "$owner" != "$(id -u)" ]; then
    die "docker/secrets/ belongs to uid $owner (made as root?); remove it (as root: rm -rf docker/secrets) or run as root"
  fi
  USER_ID=$owner
fi
say "Making the secrets (docker/make-secrets.sh): the RPC roles' (admin, reader, worker) and the ZooKeeper credentials (masters write, workers and regentctl read)."
docker/make-secrets.sh | sed 's/^/  /'

if [ "$provider" = docker ]; then
  # The masters get the daemon's socket and join its group; the workers join this network.
  if [ "$isolated" = 1 ]; then
    DOCKER_SOCKET=$work/docker.sock
  elif [[ ${DOCKER_HOST:-} == unix://* ]]; then
    DOCKER_SOCKET=${DOCKER_HOST#unix://}
  else
    DOCKER_SOCKET=/var/run/docker.sock
  fi
  [ -S "$DOCKER_SOCKET" ] || die "--provider docker: no Docker socket at $DOCKER_SOCKET to give the masters"
  DOCKER_GID=$(stat -c %g "$DOCKER_SOCKET")
  REGENT_DOCKER_NETWORK=${project}_regent
  export DOCKER_SOCKET DOCKER_GID REGENT_DOCKER_NETWORK
  step "The masters hold the daemon's socket $DOCKER_SOCKET (group $DOCKER_GID) and start workers on network $REGENT_DOCKER_NETWORK (docker-compose.provider.yml)."
fi
say "Building the images regent:compose and regent-zookeeper:compose (docker-compose build)."
build_started=$(now_ms)
compose build --quiet 2>&1 | sed 's/^/  /'
step "Built in $((($(now_ms) - build_started) / 1000)) s."

composed=1
# What a run that was cut short left of the project (a private daemon restarts such containers
# when it starts on the cache again) goes first.
compose down -v --remove-orphans --timeout 10 >/dev/null 2>&1
say "Starting the ensemble, the masters and the workers (docker-compose up -d): masters wait for a healthy ZooKeeper, workers for healthy masters."
up_started=$(now_ms)
compose up -d 2>&1 | sed 's/^/  /'

# Polls (at most $1 s) until every container of the project, running or not, is healthy.
wait_for_health() {
  local ids id health unhealthy
  for _ in $(seq $(($1 * 2))); do
    unhealthy=0
    ids=$(compose ps -a -q) || ids=""
    for id in $ids; do
      health=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id") || health=""
      [ "$health" = healthy ] || unhealthy=1
    done
    [ -n "$ids" ] && [ "$unhealthy" = 0 ] && return 0
    sleep 0.5
  done
  compose ps >&2
  die "not every container was healthy within $1 s"
}
wait_for_health 120
step "All $(compose ps -a -q | wc -l) containers healthy $((($(now_ms) - up_started) / 1000)) s after up."
compose ps | sed 's/^/  /'
# master-1's HTTP port is published on the host's loopback (inside the namespace, --isolated).
in_host_net() {
  if [ "$isolated" = 1 ]; then nsenter --net="/var/run/netns/$netns" "$@"; else "$@"; fi
}
published=$(in_host_net docker/regent-healthcheck 127.0.0.1:8081) ||
  die "master-1's HTTP port is not published on 127.0.0.1:8081"
step "master-1's HTTP port, published on 127.0.0.1:8081: GET /healthz answers $published."

# --- regentctl in a container ----------------------------------------------------------------------

# `compose run` notes each container it creates on stderr; regentctl's own errors are kept.
ctl() {
  local status=0
  compose run --rm -T regentctl "$@" 2>"$work/ctl.err" || status=$?
  grep -v -e '^Creating .*_run' -e '^ *$' -e '^\[+\]' -e 'Container .* Creat' "$work/ctl.err" >&2 || true
  return "$status"
}
# A service's container, running or not (`ps -q` alone lists running ones only in compose v2).
container_of() {
  local id
  id=$(compose ps -a -q "$1") && [ -n "$id" ] || die "no container for service $1"
  printf '%s\n' "$id"
}

leader=$(wait_for_leader_after 0 60) || die "no leader"
epoch=$(json_field epoch <<<"$leader")
say "\$ regentctl masters   (run as: docker-compose run --rm regentctl masters)"
ctl masters
say "\$ regentctl leader"
ctl leader

# Submits the demo's job: $1 tasks of half a core that print a number every second until
# cancelled; sets job to its id.
submit_ticker() {
  job=$(printf '%s\n' "name: ticker" "vertices:" "  - name: tick" "    parallelism: $1" \
    "    command:" \
    "      argv: [sh, -c, 'i=0; while true; do i=\$((i+1)); echo \"tick \$i\"; sleep 1; done']" \
    "    resources: {cpu: 0.5, memory: 64MiB}" | ctl jobs submit -)
  [[ $job =~ ^[0-9a-f]{32}$ ]] || die "regentctl jobs submit printed no job id: $job"
  step "\$ regentctl jobs submit -   ->   $job"
}
# One line per subtask with an attempt: "attempt-id pid host" (pid 0 until it runs). The JSON
# keys come sorted, so in each subtask its attempt (attempt_id, then pid) precedes its host.
# Prints nothing when regentctl fails.
attempts() {
  { ctl --json jobs status "$job" 2>"$work/attempts.err" || true; } |
    grep -o '"attempt_id":"[0-9a-f]*"\|"pid":[0-9]*\|"host":[^,}]*' |
    awk -F: '{ v = $2; gsub(/"/, "", v) }
             $1 == "\"attempt_id\"" { a = v } $1 == "\"pid\"" { p = v }
             $1 == "\"host\"" { if (a != "") print a, p, v; a = ""; p = "" }' || true
}
# Polls (at most $3 s, default 30) until $2 (default 2) tasks run; leaves their lines in $1.
wait_for_running_attempts() {
  local count=${2:-2} seconds=${3:-30}
  for _ in $(seq $((seconds * 2))); do
    attempts >"$1"
    [ "$(awk '$2 > 0' "$1" | wc -l)" -eq "$count" ] && return 0
    sleep 0.5
  done
  die "the job's $count tasks did not run within $seconds s: $(cat "$1") $(cat "$work/attempts.err")"
}
# --- Workers started on demand (--provider docker) ----------------------------------------------

# The workers the masters started: "name id epoch" per container, sorted.
started_workers() {
  docker ps -a --filter label=regent.cluster=compose \
    --format '{{.Names}} {{.ID}} {{.Label "regent.epoch"}}' | sort
}

provider_demo() {
  say "\$ regentctl workers   (no worker service runs: none is registered)"
  ctl workers
  [ -z "$(started_workers)" ] || die "worker containers exist before any job: $(started_workers)"
  say "Submitting a job of 6 tasks of half a core each; the masters start workers of 4 such slots (worker.slots 4, worker.slot-cpu 0.5)."
  submitted_ms=$(now_ms)
  submit_ticker 6
  wait_for_running_attempts "$work/attempts-before" 6 120
  step "All 6 tasks run $((($(now_ms) - submitted_ms) / 1000)) s after the submission."
  started_workers >"$work/workers-before"
  [ "$(wc -l <"$work/workers-before")" -eq 2 ] ||
    die "6 slots of 4 per worker need 2 workers; the masters started: $(cat "$work/workers-before")"
  say "\$ docker ps --filter label=regent.cluster=compose   (the 2 worker containers the leader started: name, id, epoch)"
  sed 's/^/    /' "$work/workers-before"
  say "\$ regentctl workers"
  ctl workers
  say "\$ regentctl jobs status $job"
  ctl jobs status "$job"
  say "\$ regentctl jobs logs $job --vertex tick --subtask 5 | tail -n 2   (read from the started worker's HTTP port, by its container name)"
  ctl jobs logs "$job" --vertex tick --subtask 5 | tail -n 2
  # What a task on a started worker can read, tried as user nobody like its tasks: not the
  # configuration and the worker secret the master copied into the container.
  read -r _ _ host < <(tail -n 1 "$work/attempts-before")
  docker exec -u nobody "$host" true || die "cannot run a command as user nobody in $host"
  for file in worker.yaml rpc.credential.secret-file; do
    if docker exec -u nobody "$host" cat "/etc/regent-worker/$file" >/dev/null 2>&1; then
      die "user nobody can read /etc/regent-worker/$file in $host"
    fi
  done
  step "As user nobody in $host, like its tasks: /etc/regent-worker/worker.yaml and the worker secret beside it are unreadable (mode 0600, root's)."

  leader_service=$(json_field rpc_address <<<"$leader")
  leader_service=${leader_service%%:*}
  say "Killing the leader's container: docker kill $leader_service (epoch $epoch)."
  killed_ms=$(now_ms)
  leader_id=$(container_of "$leader_service")
  docker kill "$leader_id" >/dev/null
  new_leader=$(wait_for_leader_after "$epoch" 60) || die "no new leader after the kill"
  new_epoch=$(json_field epoch <<<"$new_leader")
  step "A standby leads with epoch $new_epoch, $((($(now_ms) - killed_ms) / 1000)) s after the kill."
  wait_for_running_attempts "$work/attempts-after" 6 60
  if ! diff -q "$work/attempts-before" "$work/attempts-after" >/dev/null; then
    die "the job's attempts changed across the failover: $(cat "$work/attempts-before") -> $(cat "$work/attempts-after")"
  fi
  step "The job's 6 tasks still run: the same attempts in the same processes on the same worker containers."
  started_workers >"$work/workers-after"
  diff -q "$work/workers-before" "$work/workers-after" >/dev/null ||
    die "the worker containers changed across the failover: $(cat "$work/workers-before") -> $(cat "$work/workers-after")"
  step "The new leader adopted both worker containers and started none: $(awk '{print $1}' "$work/workers-after" | xargs)."
  say "\$ regentctl workers   (the leader of epoch $new_epoch)"
  ctl workers

  say "\$ regentctl jobs cancel $job   (the workers are idle from then on; the leader releases them after resourcemanager.workers.idle-timeout, 10 s)"
  ctl jobs cancel "$job"
  cancelled_ms=$(now_ms)
  for _ in $(seq 120); do
    [ -z "$(started_workers)" ] && break
    sleep 0.5
  done
  [ -z "$(started_workers)" ] || die "the idle worker containers were not removed within 60 s: $(started_workers)"
  step "Both worker containers are gone $((($(now_ms) - cancelled_ms) / 1000)) s after the cancel (stopped over their own connection, then removed)."
  say "\$ regentctl workers"
  ctl workers
  say "Starting the killed master again (docker start $leader_service): it joins as a standby."
  docker start "$leader_id" >/dev/null
  wait_for_health 60
}

# Polls (at most 30 s) until both workers are registered with the leader.
wait_for_workers() {
  for _ in $(seq 60); do
    [ "$(ctl --json workers 2>/dev/null | grep -c '"resource_id"' || true)" -ge 2 ] && return 0
    sleep 0.5
  done
  die "fewer than 2 workers registered with the leader within 30 s"
}
if [ "$provider" = docker ]; then
  provider_demo
  exit 0
fi
wait_for_workers
say "\$ regentctl workers   (each worker container registered its 4 slots with the leader)"
ctl workers

say "Submitting a job: two tasks that print a number every second until cancelled."
submit_ticker 2
wait_for_running_attempts "$work/attempts-before"
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
follower_id=$(container_of "$follower")
docker kill "$follower_id" >/dev/null
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
docker start "$follower_id" >/dev/null
wait_for_health 60

# --- The leader's container killed -----------------------------------------------------------------

leader_service=$(json_field rpc_address <<<"$leader")
leader_service=${leader_service%%:*}
say "Killing the leader's container: docker kill $leader_service (epoch $epoch)."
killed_ms=$(now_ms)
leader_id=$(container_of "$leader_service")
docker kill "$leader_id" >/dev/null
new_leader=$(wait_for_leader_after "$epoch" 60) || die "no new leader after the kill"
new_epoch=$(json_field epoch <<<"$new_leader")
step "A standby leads with epoch $new_epoch, $((($(now_ms) - killed_ms) / 1000)) s after the kill (the killed master's ZooKeeper session expires after its 4 s timeout first)."
say "\$ regentctl leader"
ctl leader
say "\$ regentctl masters"
ctl masters
wait_for_workers
say "\$ regentctl workers   (both workers registered again with the new leader, their slots as before)"
ctl workers
say "\$ regentctl jobs list   (the new leader recovered the job from ZooKeeper)"
ctl jobs list
wait_for_running_attempts "$work/attempts-after"
say "\$ regentctl jobs status $job"
ctl jobs status "$job"
if diff -q "$work/attempts-before" "$work/attempts-after" >/dev/null; then
  step "The job's tasks still run: the same attempts in the same processes (attempt id, pid, worker container):"
else
  die "the job's attempts changed across the failover: $(cat "$work/attempts-before") -> $(cat "$work/attempts-after")"
fi
sed 's/^/    /' "$work/attempts-after"
# Each task's user, read from /proc in the worker container that runs it (a worker's host is
# its container's host name, the container's id).
while read -r _ pid host; do
  user=$(docker exec "$host" stat -c %U "/proc/$pid") || die "pid $pid is not running in container $host"
  step "pid $pid runs in worker container $host as user $user."
done <"$work/attempts-after"
# What a task can reach, tried as user nobody in that container: not the worker's secret, and
# not the cluster's nodes in ZooKeeper (their ACL wants the credentials tasks do not have).
read -r _ _ host <"$work/attempts-after"
if docker exec -u nobody "$host" cat /run/secrets/regent-worker >/dev/null 2>&1; then
  die "user nobody can read the worker's secret in $host"
fi
if refused=$(docker exec -u nobody "$host" regentctl --zk zk-1:2181,zk-2:2181,zk-3:2181 \
  --cluster-id compose masters 2>&1); then
  die "a ZooKeeper client without credentials read the cluster's nodes: $refused"
fi
[[ $refused == *ZNOAUTH* ]] || die "regentctl without credentials failed, but not for ZooKeeper's ACL: $refused"
step "As user nobody in $host, like its tasks: the worker's secret is unreadable, and ZooKeeper refuses the cluster's nodes to a client without the credential (regentctl: ${refused#regentctl: })."
say "\$ regentctl jobs logs $job --vertex tick | tail -n 3   (the ticks go on)"
ctl jobs logs "$job" --vertex tick | tail -n 3

say "Starting the killed master again (docker start $leader_service): it joins as a standby."
docker start "$leader_id" >/dev/null
wait_for_health 60
say "\$ regentctl masters"
ctl masters

say "\$ regentctl jobs cancel $job"
ctl jobs cancel "$job"
