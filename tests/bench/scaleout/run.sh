#!/usr/bin/env bash
# Scale-out benchmark: CLIENTS LiveSync-configured PouchDB 9 clients
# spread over 1, 2 and 3 relays that keep their database on one
# CouchDB-protocol test server ([databases.store] kind = "couchdb"), in
# one run: throughput and p99 per setup, and the CPU of the relays, the
# server and the clients over the catch-up (see main.go).
#
#   tests/bench/scaleout/run.sh        # NOTES=300 CLIENTS=20 PROCS=6 SETUPS=bbolt,1,2,3 [STRACE=1]
#
# STRACE=1 counts the relays' fdatasync/fsync calls, and the time in
# them, while the clients run (strace -c).
#
# Starts the test server (tests/couchserver), builds the relay and the
# benchmark, prints one JSON line per setup and a table (stdout);
# progress goes to stderr. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/../../.."

NOTES="${NOTES:-300}"
CLIENTS="${CLIENTS:-20}"
PROCS="${PROCS:-6}"
SETUPS="${SETUPS:-bbolt,1,2,3}"
if [ ! -d tests/pouchdb/node_modules ] || [ tests/pouchdb/package-lock.json -nt tests/pouchdb/node_modules/.package-lock.json ]; then
	(cd tests/pouchdb && npm ci --no-audit --no-fund --loglevel=error)
fi
bin="$(mktemp -d -t scaleoutbench.XXXXXX)"
. tests/couchserver/start.sh
trap 'couchserver_stop; rm -rf "$bin"' EXIT
go build -o "$bin/livesync-relay" ./cmd/livesync-relay
go build -o "$bin/scaleoutbench" ./tests/bench/scaleout
couchserver_start >&2
"$bin/scaleoutbench" -relay "$bin/livesync-relay" -script tests/pouchdb/livesync-load.mjs \
	-notes "$NOTES" -clients "$CLIENTS" -procs "$PROCS" -setups "$SETUPS" ${STRACE:+-strace}
