#!/usr/bin/env bash
# Cold-pull benchmark: our engine against PouchDB 9, in one
# run on this machine, from the same CouchDB-protocol test server.
#
#   tests/bench/pull/run.sh            # RUNS=3 DOCS=10000 SIZE=1024 EXTRA_BATCH=100 EXTRA_LIMIT=25 SERVER=couch
#   SERVER=relay tests/bench/pull/run.sh   # the same from a livesync-relay
#
# Starts the server — SERVER=couch: tests/couchserver (express-pouchdb over
# in-memory PouchDB 7.3.1); SERVER=relay: a livesync-relay built from this
# tree on an empty temporary data folder, in front of nothing — loads DOCS
# chunk documents of SIZE bytes of data into one database (gopull load),
# then RUNS rounds of, in turn:
#   go      gopull pull: adapters/couchdb + replicate.Pull into
#           store.NewMemory, batch size 25, batches limit 25
#   pouchdb tests/pouchdb/replicate.mjs --stats: PouchDB 9 replicate.from,
#           batch_size 25, batches_limit 25, into a memory PouchDB
#   go-big  the same as go with EXTRA_BATCH / EXTRA_LIMIT (an extra row)
#   cli     a whole `livesync pull URL --store DIR/store.db` process (its
#           defaults) into a new bbolt store on disk, as a user runs it,
#           timed from the process's start to its exit
# Every pull is a fresh process and a cold replica (new replication id);
# the library rows are timed from the start of the replication to its
# completion. Peak memory is the process's VmHWM. Prints a table of
# medians; RESULTS_OUT=file keeps the raw JSON lines. PROFILE=file writes
# a Go CPU profile of one extra gopull pull, and PROFILE.cli one of a
# livesync pull (LIVESYNC_CPUPROFILE; PROFILE.cli-base with BASE, if that
# commit's CLI knows the variable). FSYNC=1 counts the cli row's
# fdatasync calls once more under strace. BASE=<commit> adds the go and
# cli rows built from that commit (go-base, livesync-pull-cli-base), for a
# before/after in the same run. Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/../../.."

RUNS="${RUNS:-3}"
DOCS="${DOCS:-10000}"
SIZE="${SIZE:-1024}"
EXTRA_BATCH="${EXTRA_BATCH:-100}"
EXTRA_LIMIT="${EXTRA_LIMIT:-25}"
SERVER="${SERVER:-couch}"
results="${RESULTS_OUT:-$(mktemp -t pullbench.XXXXXX)}"
: >"$results"

if [ ! -d tests/pouchdb/node_modules ] || [ tests/pouchdb/package-lock.json -nt tests/pouchdb/node_modules/.package-lock.json ]; then
	(cd tests/pouchdb && npm ci --no-audit --no-fund --loglevel=error)
fi
bin="$(mktemp -d -t pullbench.XXXXXX)"
go build -o "$bin/gopull" ./tests/bench/pull/gopull
go build -o "$bin/livesync" ./cmd/livesync
if [ -n "${BASE:-}" ]; then
	mkdir -p "$bin/base"
	git archive "$BASE" | tar -x -C "$bin/base"
	(cd "$bin/base" && go build -o "$bin/gopull-base" ./tests/bench/pull/gopull && go build -o "$bin/livesync-base" ./cmd/livesync)
fi

case "$SERVER" in
couch)
	. tests/couchserver/start.sh
	trap 'couchserver_stop; rm -rf "$bin"' EXIT
	couchserver_start
	url="$LIVESYNC_TEST_COUCHDB_URL"
	;;
relay)
	go build -o "$bin/livesync-relay" ./cmd/livesync-relay
	port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
	LIVESYNC_TEST_COUCHDB_USER=admin
	LIVESYNC_TEST_COUCHDB_PASSWORD="$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	LIVESYNC_RELAY_ADMIN_PASSWORD="$LIVESYNC_TEST_COUCHDB_PASSWORD" "$bin/livesync-relay" \
		--listen "127.0.0.1:$port" --data-dir "$bin/relay-data" --log-level warn >"$bin/relay.log" 2>&1 &
	COUCHSERVER_PID=$!
	trap 'kill "$COUCHSERVER_PID" 2>/dev/null; wait "$COUCHSERVER_PID" 2>/dev/null; rm -rf "$bin"' EXIT
	url="http://127.0.0.1:$port"
	for _ in $(seq 1 100); do
		curl -fsS -o /dev/null "$url/" 2>/dev/null && break
		sleep 0.1
	done
	;;
*)
	echo "SERVER must be couch or relay" >&2
	exit 2
	;;
esac
export LIVESYNC_TEST_COUCHDB_USER LIVESYNC_TEST_COUCHDB_PASSWORD
db="pullbench-$(date +%s)"

echo "loading $DOCS documents of $SIZE bytes into $db …"
"$bin/gopull" load -url "$url" -db "$db" -docs "$DOCS" -size "$SIZE"

# CPU time (ms) the test server has used: utime+stime of /proc/PID/stat.
server_cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) * 1000 / hz }' "/proc/$COUCHSERVER_PID/stat"
}
row() { # name, command…
	local name="$1"
	shift
	local line c0 c1
	c0="$(server_cpu_ms)"
	line="$("$@")"
	c1="$(server_cpu_ms)"
	echo "{\"impl\":\"$name\",\"serverCpuMs\":$((c1 - c0)),\"r\":$line}" >>"$results"
	echo "  $name: server CPU $((c1 - c0)) ms; $line"
}
# cli_pull: one `livesync pull` process into a new store; prints a JSON
# line like gopull's (the CLI's default batch sizes).
cli_pull() { # [livesync binary]
	local cli="${1:-$bin/livesync}" dir start end out
	dir="$(mktemp -d "$bin/cli.XXXXXX")"
	start="$(date +%s%N)"
	out="$(LIVESYNC_PASSWORD="$LIVESYNC_TEST_COUCHDB_PASSWORD" /usr/bin/time -o "$dir/time" -f '%M %U %S' \
		"$cli" pull "${url/:\/\//://$LIVESYNC_TEST_COUCHDB_USER@}/$db" --store "$dir/store.db" --json --quiet </dev/null)"
	end="$(date +%s%N)"
	node -e '
const [out, t, ns] = process.argv.slice(1);
const r = JSON.parse(out); const [rss, u, s] = t.trim().split(/\s+/).map(Number);
const ms = Number(ns) / 1e6, docs = r.pulled.docs_written;
console.log(JSON.stringify({batchSize: 100, batchesLimit: 25, docs, ms, docsPerSec: docs * 1000 / ms, peakRssKiB: rss, cpuMs: Math.round((u + s) * 1000)}));
' "$out" "$(tail -1 "$dir/time")" "$((end - start))"
	rm -rf "$dir"
}

for i in $(seq 1 "$RUNS"); do
	echo "round $i/$RUNS"
	row go "$bin/gopull" pull -url "$url" -db "$db" -batch 25 -limit 25
	row pouchdb node tests/pouchdb/replicate.mjs --url "$url" --db "$db" --batch-size 25 --batches-limit 25 --stats
	row "go-b$EXTRA_BATCH-l$EXTRA_LIMIT" "$bin/gopull" pull -url "$url" -db "$db" -batch "$EXTRA_BATCH" -limit "$EXTRA_LIMIT"
	row "livesync-pull-cli" cli_pull
	if [ -n "${BASE:-}" ]; then
		row go-base "$bin/gopull-base" pull -url "$url" -db "$db" -batch 25 -limit 25
		row livesync-pull-cli-base cli_pull "$bin/livesync-base"
	fi
done
if [ -n "${FSYNC:-}" ]; then
	d="$(mktemp -d "$bin/fsync.XXXXXX")"
	LIVESYNC_PASSWORD="$LIVESYNC_TEST_COUCHDB_PASSWORD" strace -f -c -e trace=fdatasync,fsync -o "$d/strace" \
		"$bin/livesync" pull "${url/:\/\//://$LIVESYNC_TEST_COUCHDB_USER@}/$db" --store "$d/store.db" --quiet </dev/null >/dev/null
	echo "fdatasync/fsync calls of one livesync pull:"
	cat "$d/strace"
fi
if [ -n "${PROFILE:-}" ]; then
	"$bin/gopull" pull -url "$url" -db "$db" -batch 25 -limit 25 -cpuprofile "$PROFILE" >/dev/null
	echo "Go CPU profile of one batch-25 pull: $PROFILE (go tool pprof -top $PROFILE)"
	d="$(mktemp -d "$bin/profile.XXXXXX")"
	LIVESYNC_CPUPROFILE="$PROFILE.cli" LIVESYNC_PASSWORD="$LIVESYNC_TEST_COUCHDB_PASSWORD" \
		"$bin/livesync" pull "${url/:\/\//://$LIVESYNC_TEST_COUCHDB_USER@}/$db" --store "$d/store.db" --quiet </dev/null >/dev/null
	echo "Go CPU profile of one livesync pull: $PROFILE.cli (go tool pprof -top $PROFILE.cli)"
	if [ -n "${BASE:-}" ] && LIVESYNC_CPUPROFILE="$PROFILE.cli-base" LIVESYNC_PASSWORD="$LIVESYNC_TEST_COUCHDB_PASSWORD" \
		"$bin/livesync-base" pull "${url/:\/\//://$LIVESYNC_TEST_COUCHDB_USER@}/$db" --store "$d/base.db" --quiet </dev/null >/dev/null &&
		[ -s "$PROFILE.cli-base" ]; then
		echo "and of the base commit's: $PROFILE.cli-base"
	fi
fi

SERVER="$SERVER" node - "$results" "$DOCS" "$SIZE" <<'JS'
const fs = require('fs');
const [file, docs, size] = process.argv.slice(2);
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const by = {};
for (const { impl, serverCpuMs, r } of rows) {
	r.serverCpuMs = serverCpuMs;
	// `livesync pull` may leave one document of its own on the server
	// (the sync parameters), which the pulls after it copy too.
	if (r.docs < Number(docs) || r.docs > Number(docs) + 1) throw new Error(`${impl} pulled ${r.docs} documents, want ${docs}`);
	(by[impl] ||= []).push(r);
}
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const p = med(by.pouchdb.map((r) => r.docsPerSec));
console.log(`\ncold pull of ${docs} docs × ${size} B from ${process.env.SERVER || 'couch'}, medians of ${by.pouchdb.length} runs`);
console.log('| client | batch / limit | docs/s (runs) | median docs/s | × PouchDB | peak RSS MiB | client CPU s | server CPU s | wall s |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const [impl, rs] of Object.entries(by)) {
	const d = med(rs.map((r) => r.docsPerSec));
	console.log(`| ${impl} | ${rs[0].batchSize} / ${rs[0].batchesLimit} | ${rs.map((r) => r.docsPerSec.toFixed(0)).join(', ')} | ${d.toFixed(0)} | ${(d / p).toFixed(2)} | ${(med(rs.map((r) => r.peakRssKiB)) / 1024).toFixed(0)} | ${rs[0].cpuMs === undefined ? 'n/a' : (med(rs.map((r) => r.cpuMs)) / 1000).toFixed(1)} | ${(med(rs.map((r) => r.serverCpuMs)) / 1000).toFixed(1)} | ${(med(rs.map((r) => r.ms)) / 1000).toFixed(1)} |`);
}
JS
