# shellcheck shell=bash
#
# .ci/postgres.sh: start a local PostgreSQL server for the test suites and
# export LEDGER_TEST_POSTGRES_URL. Sourced by .ci/run (`source .ci/postgres.sh`);
# it can also be sourced by hand before `go test ./...`.
#
# What it does, each step skipped when already done:
#   1. installs PostgreSQL from Debian's packages when no server binaries are
#      found (apt-get update && apt-get install -y postgresql);
#   2. creates a cluster in $LEDGER_PG_DIR (default /tmp/ledger-ci-postgres),
#      owned by the postgres user when run as root, listening on 127.0.0.1 only,
#      on a free port (kept in $LEDGER_PG_DIR/ledger-port), with its Unix
#      socket inside the data directory;
#   3. starts it and waits until it accepts connections;
#   4. creates the role `ledger` (password `ledger`, local test use only) and
#      the database `ledger_test` that it owns;
#   5. exports LEDGER_TEST_POSTGRES_URL.
#
# Running it twice is fine: the second run finds the cluster running (or
# starts it again) and exports the same URL. The server keeps running after
# the script; stop it with `ledger_pg_stop`.
#
# Sourcing never changes the caller's shell options: the work runs in a
# subshell and only the export happens in the caller. The return status is
# non-zero when the server could not be started.

ledger_pg_setup() {
	local out
	out="$(
		set -euo pipefail

		dir="${LEDGER_PG_DIR:-/tmp/ledger-ci-postgres}"
		log() { printf 'postgres.sh: %s\n' "$*" >&2; }

		find_bindir() {
			local d
			for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
				if [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
					printf '%s\n' "$d"
					return 0
				fi
			done
			return 1
		}

		bindir="$(find_bindir || true)"
		if [ -z "$bindir" ]; then
			log "PostgreSQL server not found; installing it from Debian's packages"
			if [ "$(id -u)" -ne 0 ]; then
				log "installing needs root"
				exit 1
			fi
			export DEBIAN_FRONTEND=noninteractive
			apt-get update >&2
			apt-get install -y --no-install-recommends postgresql >&2
			bindir="$(find_bindir)"
		fi

		# Run server commands as the postgres user when we are root (the
		# server refuses to run as root), else as ourselves.
		if [ "$(id -u)" -eq 0 ]; then
			if ! id postgres >/dev/null 2>&1; then
				useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
			fi
			as_pg() { runuser -u postgres -- "$@"; }
		else
			as_pg() { "$@"; }
		fi

		port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

		if [ ! -s "$dir/PG_VERSION" ]; then
			log "creating a cluster in $dir"
			rm -rf "$dir"
			mkdir -p "$dir"
			chmod 700 "$dir"
			if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
			as_pg "$bindir/initdb" -D "$dir" -U postgres --auth-local=trust \
				--auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
		fi

		if ! as_pg "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
			# Not running: a postmaster.pid left by a killed server is stale.
			rm -f "$dir/postmaster.pid"
			port=""
			if [ -s "$dir/ledger-port" ]; then port="$(cat "$dir/ledger-port")"; fi
			if [ -z "$port" ] || port_in_use "$port"; then
				port=54329
				while port_in_use "$port"; do port=$((port + 1)); done
			fi
			cat >"$dir/ledger.conf" <<-EOF
				listen_addresses = '127.0.0.1'
				port = $port
				unix_socket_directories = '$dir'
				max_connections = 200
				shared_buffers = 256MB
				log_min_messages = warning
			EOF
			if ! grep -q "^include_if_exists = 'ledger.conf'" "$dir/postgresql.conf"; then
				echo "include_if_exists = 'ledger.conf'" >>"$dir/postgresql.conf"
			fi
			if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir/ledger.conf" "$dir/postgresql.conf"; fi
			printf '%s\n' "$port" >"$dir/ledger-port"
			log "starting PostgreSQL on 127.0.0.1:$port"
			as_pg "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null
		fi
		port="$(cat "$dir/ledger-port")"

		for _ in $(seq 1 100); do
			if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; then break; fi
			sleep 0.1
		done
		"$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"

		psql_pg() { as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres "$@"; }
		if [ "$(psql_pg -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'ledger'")" != 1 ]; then
			psql_pg -c "CREATE ROLE ledger LOGIN PASSWORD 'ledger'"
		fi
		if [ "$(psql_pg -tAc "SELECT 1 FROM pg_database WHERE datname = 'ledger_test'")" != 1 ]; then
			psql_pg -c "CREATE DATABASE ledger_test OWNER ledger"
		fi

		printf 'postgres://ledger:ledger@127.0.0.1:%s/ledger_test?sslmode=disable\n' "$port"
	)" || return 1
	export LEDGER_TEST_POSTGRES_URL="$out"
	printf 'postgres.sh: LEDGER_TEST_POSTGRES_URL points at %s\n' "${out#*@}" >&2
}

# ledger_pg_stop stops the server that ledger_pg_setup started.
ledger_pg_stop() {
	local dir="${LEDGER_PG_DIR:-/tmp/ledger-ci-postgres}" bindir
	bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r | head -n1)"
	[ -n "$bindir" ] && [ -s "$dir/PG_VERSION" ] || return 0
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$bindir/pg_ctl" -D "$dir" -m fast stop
	else
		"$bindir/pg_ctl" -D "$dir" -m fast stop
	fi
}

ledger_pg_setup
