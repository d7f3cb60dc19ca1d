#!/usr/bin/env bash
# Makes the RPC role secrets docker-compose.yml mounts (docs/docker.md): docker/secrets/admin,
# reader and worker, 32 random bytes each (base64), mode 600 in a mode 700 directory. Existing
# files are kept, so running it again changes nothing; --force makes new ones.
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
chmod 700 secrets
for role in admin reader worker; do
  file=secrets/$role
  if [ "$force" = 1 ] || [ ! -s "$file" ]; then
    (umask 077 && head -c 32 /dev/urandom | base64 >"$file.new")
    mv -f "$file.new" "$file"
    echo "make-secrets: wrote docker/$file"
  fi
  chmod 600 "$file"
  if [ "$(id -u)" -eq 0 ]; then
    chown "$uid:$uid" "$file"
  elif [ "$(stat -c %u "$file")" != "$uid" ]; then
    echo "make-secrets: docker/$file belongs to uid $(stat -c %u "$file"), not USER_ID=$uid:" \
      "build the image with USER_ID=$(stat -c %u "$file") so its user can read it" >&2
  fi
done
