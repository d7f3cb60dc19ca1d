#!/usr/bin/env bash
# Makes the secrets docker-compose.yml mounts (docs/docker.md, "Secrets"), in docker/secrets/
# (mode 700; every file mode 600):
#   admin, reader, worker    the RPC roles' shared secrets, 32 random bytes each (base64)
#   zookeeper-writer.yaml    the masters' ZooKeeper digest credentials, as a regent config file:
#                            ha.zookeeper.auth (they write) and ha.zookeeper.read-auth (they
#                            grant it read access)
#   zookeeper-reader.yaml    ha.zookeeper.read-auth alone, for workers and regentctl
# Existing files are kept, so running it again changes nothing; --force makes new ones.
# The containers' user `regent` (uid USER_ID, default 10001) must be able to read them: run as
# root, the files are given to that uid; otherwise they stay yours, and the image must be built
# with USER_ID set to your uid (scripts/compose-demo.sh does that).
set -euo pipefail
cd "$(dirname "$0")"

force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  *) echo "usage: docker/make-secrets.sh [--force]" >&2; exit 2 ;;
esac

uid=${USER_ID:-10001}
(umask 077 && mkdir -p secrets)
if [ "$(id -u)" -ne 0 ] && [ "$(stat -c %u secrets)" != "$(id -u)" ]; then
  echo "make-secrets: docker/secrets belongs to uid $(stat -c %u secrets), not you; remove it (as root) or run as root" >&2
  exit 1
fi
chmod 700 secrets

random_text() { head -c 48 /dev/urandom | base64 | tr -d '\n+/=' | cut -c1-32; }

# Writes $1 (under secrets/) from stdin, unless it exists and --force was not given.
write_secret() {
  local file=secrets/$1
  if [ "$force" = 1 ] || [ ! -s "$file" ]; then
    (umask 077 && cat >"$file.new")
    mv -f "$file.new" "$file"
    echo "make-secrets: wrote docker/$file"
  else
    cat >/dev/null
  fi
  chmod 600 "$file"
  if [ "$(id -u)" -eq 0 ]; then
    chown "$uid:$uid" "$file"
  elif [ "$(stat -c %u "$file")" != "$uid" ]; then
    echo "make-secrets: docker/$file belongs to uid $(stat -c %u "$file"), not USER_ID=$uid:" \
      "build the image with USER_ID=$(stat -c %u "$file") so its user can read it" >&2
  fi
}

for role in admin reader worker; do
  head -c 32 /dev/urandom | base64 | write_secret "$role"
done

# The reader's credential is in both files: it is made once, or read back from the writer's
# file when that one is kept.
if [ "$force" = 1 ] || [ ! -s secrets/zookeeper-writer.yaml ]; then
  read_auth="reader:$(random_text)"
  # A reader file kept from before would hold another credential.
  rm -f secrets/zookeeper-reader.yaml
  printf '# ZooKeeper digest credentials of the masters (docs/security.md, "ZooKeeper").\nha.zookeeper.auth: "regent:%s"\nha.zookeeper.read-auth: "%s"\n' \
    "$(random_text)" "$read_auth" | write_secret zookeeper-writer.yaml
else
  write_secret zookeeper-writer.yaml </dev/null
  read_auth=$(sed -n 's/^ha.zookeeper.read-auth: "\(.*\)"$/\1/p' secrets/zookeeper-writer.yaml)
  [ -n "$read_auth" ] || { echo "make-secrets: docker/secrets/zookeeper-writer.yaml has no ha.zookeeper.read-auth line; run with --force" >&2; exit 1; }
fi
# Derived from the writer's file: made again whenever it says something else.
reader=$(printf '# ZooKeeper read credential of workers and regentctl (docs/security.md, "ZooKeeper").\nha.zookeeper.read-auth: "%s"' "$read_auth")
if [ -s secrets/zookeeper-reader.yaml ] && [ "$(cat secrets/zookeeper-reader.yaml)" != "$reader" ]; then
  rm -f secrets/zookeeper-reader.yaml
fi
printf '%s\n' "$reader" | write_secret zookeeper-reader.yaml
