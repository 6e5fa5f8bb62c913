#!/usr/bin/env bash
# Starts the S3 test server (versitygw v1.8.0, posix backend, DESIGN.md §7)
# in the background on 127.0.0.1 with a free port, a temporary directory and
# random root keys, waits until it answers, and exports what the S3
# integration tests read:
#   LIVESYNC_TEST_S3_ENDPOINT (host:port; https://127.0.0.1:port with TLS),
#   LIVESYNC_TEST_S3_ACCESS_KEY, LIVESYNC_TEST_S3_SECRET_KEY,
#   LIVESYNC_TEST_S3_BUCKET_PREFIX,
#   LIVESYNC_TEST_S3_REGION (the region the server enforces: lsgo-local-1),
#   LIVESYNC_TEST_S3_VIRTUAL_DOMAIN (localhost: bucket.localhost:port is a
#     virtual-host-style request for "bucket"),
#   with S3SERVER_TLS=1 also LIVESYNC_TEST_S3_SECURE=1 and
#   LIVESYNC_TEST_S3_CA_FILE (a self-signed certificate for 127.0.0.1,
#   localhost and *.localhost, made with openssl),
# and S3SERVER_PID.
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
	local port access secret out region=lsgo-local-1 scheme=http
	port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')" || return 1
	access="lsgo$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
	secret="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
	S3SERVER_DIR="$(mktemp -d -t s3server.XXXXXX)"
	out="$S3SERVER_DIR/log"
	mkdir -p "$S3SERVER_DIR/data"
	local tls=()
	if [ "${S3SERVER_TLS:-}" = 1 ]; then
		scheme=https
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
			-subj "/CN=livesync-go s3server" \
			-addext "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:*.localhost" \
			-keyout "$S3SERVER_DIR/key.pem" -out "$S3SERVER_DIR/cert.pem" >"$out" 2>&1 || { cat "$out" >&2; s3server_stop; return 1; }
		tls=(--cert "$S3SERVER_DIR/cert.pem" --key "$S3SERVER_DIR/key.pem")
	fi
	# --region: requests signed for another region are refused, as AWS and
	# a MinIO with a region do. --virtual-domain: bucket.localhost:port is
	# served as virtual-host style; 127.0.0.1:port stays path style.
	ROOT_ACCESS_KEY="$access" ROOT_SECRET_KEY="$secret" \
		"$bin" --port "127.0.0.1:$port" --region "$region" --virtual-domain localhost "${tls[@]}" \
		--quiet posix "$S3SERVER_DIR/data" >>"$out" 2>&1 &
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
		if node -e 'require(process.argv[2]).get(process.argv[1],{rejectUnauthorized:false},r=>process.exit(0)).on("error",()=>process.exit(1))' \
			"$scheme://127.0.0.1:$port/" "$scheme" 2>/dev/null; then
			if [ "$scheme" = https ]; then
				export LIVESYNC_TEST_S3_ENDPOINT="https://127.0.0.1:$port"
				export LIVESYNC_TEST_S3_SECURE=1
				export LIVESYNC_TEST_S3_CA_FILE="$S3SERVER_DIR/cert.pem"
			else
				export LIVESYNC_TEST_S3_ENDPOINT="127.0.0.1:$port"
				unset LIVESYNC_TEST_S3_SECURE LIVESYNC_TEST_S3_CA_FILE
			fi
			export LIVESYNC_TEST_S3_ACCESS_KEY="$access"
			export LIVESYNC_TEST_S3_SECRET_KEY="$secret"
			export LIVESYNC_TEST_S3_BUCKET_PREFIX="lsgo-test-"
			export LIVESYNC_TEST_S3_REGION="$region"
			export LIVESYNC_TEST_S3_VIRTUAL_DOMAIN=localhost
			export S3SERVER_PID S3SERVER_DIR
			echo "s3server: versitygw listening on $scheme://127.0.0.1:$port (region $region, pid $S3SERVER_PID)"
			return 0
		fi
		sleep 0.1
	done
	echo "s3server: no answer on port $port within 15 s:" >&2
	cat "$out" >&2
	s3server_stop
	return 1
}
