#!/usr/bin/env bash
# Makes a real PostgreSQL reachable at 127.0.0.1:5432 as `postgres` with trust auth and a `test`
# database, whatever state the machine is in, and prints the DATABASE_URL to use. Idempotent.
# Prints nothing (and exits 0) when no PostgreSQL can be had: the tests then run on PGlite only.
set -uo pipefail

url="postgres://postgres@127.0.0.1:5432/test"
if ! command -v pg_lsclusters >/dev/null 2>&1; then
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; } >&2 || exit 0
fi
version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
[ -n "$version" ] || exit 0
as_postgres() { if [ "$(id -un)" = postgres ]; then "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi; }

if ! pg_lsclusters --no-header 2>/dev/null | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || pg_ctlcluster "$version" main start >&2 || exit 0
fi

for _ in $(seq 1 30); do
  pg_isready -h 127.0.0.1 -p 5432 -q && break
  sleep 1
done

if ! psql "postgres://postgres@127.0.0.1:5432/postgres" -Atqc 'select 1' >/dev/null 2>&1; then
  hba=$(as_postgres psql -Atqc 'show hba_file' 2>/dev/null)
  if [ -n "$hba" ] && [ -f "$hba" ]; then
    # Trust local TCP logins first, so this line wins over any later md5/scram line.
    sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
    as_postgres psql -Atqc 'select pg_reload_conf()' >/dev/null
    sleep 1
  fi
fi

psql "postgres://postgres@127.0.0.1:5432/postgres" -Atqc 'select 1' >/dev/null 2>&1 || exit 0
if [ "$(psql "postgres://postgres@127.0.0.1:5432/postgres" -Atqc "select 1 from pg_database where datname = 'test'")" != 1 ]; then
  psql "postgres://postgres@127.0.0.1:5432/postgres" -qc 'create database test' >&2
fi
echo "$url"
