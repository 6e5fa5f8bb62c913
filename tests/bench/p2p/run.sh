#!/usr/bin/env bash
# Peer-to-peer benchmark: a cold pull of one end-to-end encrypted vault
# peer to peer on loopback (adapters/p2p) against the same pull through
# the relay's CouchDB endpoint (cmd/livesync-relay), in one run.
#
#   tests/bench/p2p/run.sh            # NOTES=10000 SIZE=1024 RUNS=3
#
# Builds the relay binary and tests/bench/p2p, then runs it: see the
# command's package documentation (main.go) for the rows and what the
# numbers count. Prints one JSON line per pull (stdout) and a table of
# medians; progress goes to stderr. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/../../.."

NOTES="${NOTES:-10000}"
SIZE="${SIZE:-1024}"
RUNS="${RUNS:-3}"
bin="$(mktemp -d -t p2pbench.XXXXXX)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/livesync-relay" ./cmd/livesync-relay
go build -o "$bin/p2pbench" ./tests/bench/p2p
"$bin/p2pbench" -relay "$bin/livesync-relay" -notes "$NOTES" -size "$SIZE" -runs "$RUNS"
