# Sourced by .ci/run: install PostgreSQL if missing, start a throwaway server on loopback and
# export KVPLAN_TEST_POSTGRES_URL for the distributed-storage tests.
pg_bin=""
for dir in /usr/lib/postgresql/*/bin; do [ -x "$dir/initdb" ] && pg_bin="$dir"; done
if [ -z "$pg_bin" ]; then
  echo "installing PostgreSQL (apt)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || return 1
  for dir in /usr/lib/postgresql/*/bin; do [ -x "$dir/initdb" ] && pg_bin="$dir"; done
fi
[ -n "$pg_bin" ] || return 1
pg_user=postgres
id "$pg_user" >/dev/null 2>&1 || useradd --system --no-create-home "$pg_user" || return 1
pg_dir=$(mktemp -d /tmp/kvplan-pg.XXXXXX)
chown "$pg_user" "$pg_dir"
pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "$pg_user" -- "$@"; else "$@"; fi; }
as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U kvplan --auth=trust >/dev/null || return 1
as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
  -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1" start >/dev/null || return 1
as_pg "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U kvplan kvplan_test || return 1
export KVPLAN_TEST_POSTGRES_URL="postgresql://kvplan@127.0.0.1:$pg_port/kvplan_test"
echo "PostgreSQL running: $KVPLAN_TEST_POSTGRES_URL"
