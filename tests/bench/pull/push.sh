#!/usr/bin/env bash
# Push benchmark: `livesync push` of a local replica of DOCS chunk
# documents into a new database, in interleaved rounds, with its wall
# time, the CLI's and the server's CPU, and once more under strace (the
# client's fdatasync count) and with LIVESYNC_CPUPROFILE.
#
#   tests/bench/pull/push.sh             # RUNS=3 DOCS=10000 SERVER=relay
#   SERVER=couch tests/bench/pull/push.sh
#   BASE=<commit> tests/bench/pull/push.sh   # the CLI built from that commit too, in turns
#   PROFILE=dir                           # CPU profiles (dir/push-livesync.prof, …-base.prof)
#
# The replica is made by pulling a database loaded by gopull. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/../../.."
RUNS="${RUNS:-3}"
DOCS="${DOCS:-10000}"
SERVER="${SERVER:-relay}"
bin="$(mktemp -d -t pushbench.XXXXXX)"
go build -o "$bin/gopull" ./tests/bench/pull/gopull
go build -o "$bin/livesync" ./cmd/livesync
clis=livesync
if [ -n "${BASE:-}" ]; then
	mkdir -p "$bin/base"
	git archive "$BASE" | tar -x -C "$bin/base"
	(cd "$bin/base" && go build -o "$bin/livesync-base" ./cmd/livesync)
	clis="livesync livesync-base"
fi
if [ "$SERVER" = couch ]; then
	. tests/couchserver/start.sh
	trap 'couchserver_stop; rm -rf "$bin"' EXIT
	couchserver_start >/dev/null
	pid=$COUCHSERVER_PID
	user="$LIVESYNC_TEST_COUCHDB_USER" pw="$LIVESYNC_TEST_COUCHDB_PASSWORD" hp="${LIVESYNC_TEST_COUCHDB_URL#http://}"
else
	go build -o "$bin/livesync-relay" ./cmd/livesync-relay
	port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
	user=admin pw="$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" hp="127.0.0.1:$port"
	LIVESYNC_RELAY_ADMIN_PASSWORD="$pw" "$bin/livesync-relay" --listen "$hp" --data-dir "$bin/relay-data" \
		--log-level warn >"$bin/relay.log" 2>&1 &
	pid=$!
	trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$bin"' EXIT
	for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://$hp/" 2>/dev/null && break; sleep 0.1; done
fi
export LIVESYNC_PASSWORD="$pw" LIVESYNC_TEST_COUCHDB_USER="$user" LIVESYNC_TEST_COUCHDB_PASSWORD="$pw"
echo "loading $DOCS documents and pulling them into a local replica …"
"$bin/gopull" load -url "http://$hp" -db src -docs "$DOCS" -size 1024 >/dev/null
"$bin/livesync" pull "http://$user@$hp/src" --store "$bin/replica.db" --quiet </dev/null >/dev/null

# CPU time (ms) the server has used.
server_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) * 1000 / hz }' "/proc/$pid/stat"; }
n=0
push() { # cli, then a command prefix
	local cli="$1"
	shift
	n=$((n + 1))
	"$@" "$bin/$cli" push "http://$user@$hp/dst-$n" --store "$bin/replica.db" --quiet </dev/null >/dev/null
}
for i in $(seq 1 "$RUNS"); do
	for cli in $clis; do
		c0="$(server_cpu_ms)" s="$(date +%s%N)"
		push "$cli" /usr/bin/time -o "$bin/time" -f '%U %S'
		e="$(date +%s%N)" c1="$(server_cpu_ms)"
		read -r u sy <"$bin/time"
		echo "round $i $cli: $(((e - s) / 1000000)) ms, $((DOCS * 1000000000 / (e - s))) docs/s, client CPU $(printf %.2f "$(echo "$u + $sy" | bc)") s, server CPU $(echo "$c1 - $c0" | bc) ms"
	done
done
for cli in $clis; do
	push "$cli" strace -f -c -e trace=fdatasync,fsync -o "$bin/strace"
	echo "$cli: $(awk '$NF == "total" { print $4 }' "$bin/strace") fdatasync/fsync calls"
	if [ -n "${PROFILE:-}" ]; then
		mkdir -p "$PROFILE"
		push "$cli" env LIVESYNC_CPUPROFILE="$PROFILE/push-$cli.prof"
	fi
done
