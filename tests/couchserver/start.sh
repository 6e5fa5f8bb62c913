#!/usr/bin/env bash
# Starts the CouchDB-protocol test server (launcher.js) in the background on
# 127.0.0.1 with a free port and a random admin password, waits until it
# answers, and exports what the integration tests read:
#   LIVESYNC_TEST_COUCHDB_URL, LIVESYNC_TEST_COUCHDB_USER,
#   LIVESYNC_TEST_COUCHDB_PASSWORD, and COUCHSERVER_PID.
# Source it (". tests/couchserver/start.sh"); the caller owns the process
# and kills it on exit (the function couchserver_stop does that).
# Needs node and npm; installs the locked dependencies with npm ci when
# node_modules is missing or older than the lockfile.

_couchserver_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

couchserver_stop() {
	if [ -n "${COUCHSERVER_PID:-}" ]; then
		kill "$COUCHSERVER_PID" 2>/dev/null || true
		wait "$COUCHSERVER_PID" 2>/dev/null || true
		COUCHSERVER_PID=""
	fi
}

couchserver_start() {
	local dir="$_couchserver_dir"
	if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || return 1
	fi
	local port pass out
	port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')" || return 1
	pass="$(node -e 'console.log(require("crypto").randomBytes(18).toString("hex"))')" || return 1
	out="$(mktemp -t couchserver.XXXXXX)"
	node "$dir/launcher.js" "$port" admin "$pass" 127.0.0.1 >"$out" 2>&1 &
	COUCHSERVER_PID=$!
	local i
	for i in $(seq 1 100); do # at most 10 s
		if ! kill -0 "$COUCHSERVER_PID" 2>/dev/null; then
			echo "couchserver: launcher exited:" >&2
			cat "$out" >&2
			rm -f "$out"
			COUCHSERVER_PID=""
			return 1
		fi
		if node -e 'require("http").get(process.argv[1],r=>process.exit(r.statusCode===200?0:1)).on("error",()=>process.exit(1))' "http://127.0.0.1:$port/" 2>/dev/null; then
			rm -f "$out"
			export LIVESYNC_TEST_COUCHDB_URL="http://127.0.0.1:$port"
			export LIVESYNC_TEST_COUCHDB_USER=admin
			export LIVESYNC_TEST_COUCHDB_PASSWORD="$pass"
			export COUCHSERVER_PID
			echo "couchserver: listening on $LIVESYNC_TEST_COUCHDB_URL (pid $COUCHSERVER_PID)"
			return 0
		fi
		sleep 0.1
	done
	echo "couchserver: no answer on port $port within 10 s:" >&2
	cat "$out" >&2
	rm -f "$out"
	couchserver_stop
	return 1
}
