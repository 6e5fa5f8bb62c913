#!/usr/bin/env bash
# Starts the S3 test server (versitygw v1.8.0, posix backend, DESIGN.md §7)
# in the background on 127.0.0.1 with a free port, a temporary directory and
# random root keys, waits until it answers, and exports what the S3
# integration tests read:
#   LIVESYNC_TEST_S3_ENDPOINT (host:port, plain HTTP),
#   LIVESYNC_TEST_S3_ACCESS_KEY, LIVESYNC_TEST_S3_SECRET_KEY,
#   LIVESYNC_TEST_S3_BUCKET_PREFIX, and S3SERVER_PID.
# Source it (". tests/s3server/start.sh"); the caller owns the process and
# kills it on exit (the function s3server_stop does that, and removes the
# temporary directory). Needs go (to build versitygw into .tools/ once,
# about 70 s cold) and node (to pick a port and probe the server).

_s3server_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
S3SERVER_VERSION=v1.8.0

s3server_stop() {
	if [ -n "${S3SERVER_PID:-}" ]; then
		kill "$S3SERVER_PID" 2>/dev/null || true
		wait "$S3SERVER_PID" 2>/dev/null || true
		S3SERVER_PID=""
	fi
	if [ -n "${S3SERVER_DIR:-}" ]; then
		rm -rf "$S3SERVER_DIR"
		S3SERVER_DIR=""
	fi
}

s3server_start() {
	local root="$_s3server_root"
	local bin="$root/.tools/versitygw"
	if [ ! -x "$bin" ] || [ "$(cat "$root/.tools/versitygw.version" 2>/dev/null)" != "$S3SERVER_VERSION" ]; then
		echo "s3server: building versitygw $S3SERVER_VERSION into .tools/"
		mkdir -p "$root/.tools"
		GOBIN="$root/.tools" GOFLAGS= go install "github.com/versity/versitygw/cmd/versitygw@$S3SERVER_VERSION" || return 1
		echo "$S3SERVER_VERSION" >"$root/.tools/versitygw.version"
	fi
	local port access secret out
	port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')" || return 1
	access="lsgo$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	secret="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
	S3SERVER_DIR="$(mktemp -d -t s3server.XXXXXX)"
	out="$S3SERVER_DIR/log"
	mkdir -p "$S3SERVER_DIR/data"
	ROOT_ACCESS_KEY="$access" ROOT_SECRET_KEY="$secret" \
		"$bin" --port "127.0.0.1:$port" --quiet posix "$S3SERVER_DIR/data" >"$out" 2>&1 &
	S3SERVER_PID=$!
	local i
	for i in $(seq 1 150); do # at most 15 s
		if ! kill -0 "$S3SERVER_PID" 2>/dev/null; then
			echo "s3server: versitygw exited:" >&2
			cat "$out" >&2
			S3SERVER_PID=""
			s3server_stop
			return 1
		fi
		# Any HTTP answer (an anonymous request gets 403) means it is up.
		if node -e 'require("http").get(process.argv[1],r=>process.exit(0)).on("error",()=>process.exit(1))' "http://127.0.0.1:$port/" 2>/dev/null; then
			export LIVESYNC_TEST_S3_ENDPOINT="127.0.0.1:$port"
			export LIVESYNC_TEST_S3_ACCESS_KEY="$access"
			export LIVESYNC_TEST_S3_SECRET_KEY="$secret"
			export LIVESYNC_TEST_S3_BUCKET_PREFIX="lsgo-test-"
			export S3SERVER_PID S3SERVER_DIR
			echo "s3server: versitygw listening on http://$LIVESYNC_TEST_S3_ENDPOINT (pid $S3SERVER_PID)"
			return 0
		fi
		sleep 0.1
	done
	echo "s3server: no answer on port $port within 15 s:" >&2
	cat "$out" >&2
	s3server_stop
	return 1
}
