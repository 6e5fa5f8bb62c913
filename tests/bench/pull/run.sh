#!/usr/bin/env bash
# Cold-pull benchmark: our engine against PouchDB 9, in one
# run on this machine, from the same CouchDB-protocol test server.
#
#   tests/bench/pull/run.sh            # RUNS=3 DOCS=10000 SIZE=1024 EXTRA_BATCH=100 EXTRA_LIMIT=25
#
# Starts tests/couchserver (express-pouchdb over in-memory PouchDB 7.3.1),
# loads DOCS chunk documents of SIZE bytes of data into one database
# (gopull load), then RUNS rounds of, in turn:
#   go      gopull pull: adapters/couchdb + replicate.Pull into
#           store.NewMemory, batch size 25, batches limit 25
#   go-big  the same with EXTRA_BATCH / EXTRA_LIMIT (an extra row)
#   pouchdb tests/pouchdb/replicate.mjs --stats: PouchDB 9 replicate.from,
#           batch_size 25, batches_limit 25, into a memory PouchDB
# Every pull is a fresh process and a cold replica (new replication id),
# timed from the start of the replication to its completion. Peak memory is
# the process's VmHWM. Prints a table of medians; RESULTS_OUT=file keeps
# the raw JSON lines. PROFILE=file writes a Go CPU profile of one extra pull.
# Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/../../.."

RUNS="${RUNS:-3}"
DOCS="${DOCS:-10000}"
SIZE="${SIZE:-1024}"
EXTRA_BATCH="${EXTRA_BATCH:-100}"
EXTRA_LIMIT="${EXTRA_LIMIT:-25}"
results="${RESULTS_OUT:-$(mktemp -t pullbench.XXXXXX)}"
: >"$results"

if [ ! -d tests/pouchdb/node_modules ] || [ tests/pouchdb/package-lock.json -nt tests/pouchdb/node_modules/.package-lock.json ]; then
	(cd tests/pouchdb && npm ci --no-audit --no-fund --loglevel=error)
fi
bin="$(mktemp -d -t pullbench.XXXXXX)"
go build -o "$bin/gopull" ./tests/bench/pull/gopull

. tests/couchserver/start.sh
trap 'couchserver_stop; rm -rf "$bin"' EXIT
couchserver_start
export LIVESYNC_TEST_COUCHDB_USER LIVESYNC_TEST_COUCHDB_PASSWORD
url="$LIVESYNC_TEST_COUCHDB_URL"
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
for i in $(seq 1 "$RUNS"); do
	echo "round $i/$RUNS"
	row go "$bin/gopull" pull -url "$url" -db "$db" -batch 25 -limit 25
	row pouchdb node tests/pouchdb/replicate.mjs --url "$url" --db "$db" --batch-size 25 --batches-limit 25 --stats
	row "go-b$EXTRA_BATCH-l$EXTRA_LIMIT" "$bin/gopull" pull -url "$url" -db "$db" -batch "$EXTRA_BATCH" -limit "$EXTRA_LIMIT"
done
if [ -n "${PROFILE:-}" ]; then
	"$bin/gopull" pull -url "$url" -db "$db" -batch 25 -limit 25 -cpuprofile "$PROFILE" >/dev/null
	echo "Go CPU profile of one batch-25 pull: $PROFILE (go tool pprof -top $bin/gopull $PROFILE)"
fi

node - "$results" "$DOCS" "$SIZE" <<'JS'
const fs = require('fs');
const [file, docs, size] = process.argv.slice(2);
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const by = {};
for (const { impl, serverCpuMs, r } of rows) {
	r.serverCpuMs = serverCpuMs;
	if (r.docs !== Number(docs)) throw new Error(`${impl} pulled ${r.docs} documents, want ${docs}`);
	(by[impl] ||= []).push(r);
}
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const p = med(by.pouchdb.map((r) => r.docsPerSec));
console.log(`\ncold pull of ${docs} docs × ${size} B, medians of ${by.pouchdb.length} runs`);
console.log('| client | batch / limit | docs/s (runs) | median docs/s | × PouchDB | peak RSS MiB | client CPU s | server CPU s | wall s |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const [impl, rs] of Object.entries(by)) {
	const d = med(rs.map((r) => r.docsPerSec));
	console.log(`| ${impl} | ${rs[0].batchSize} / ${rs[0].batchesLimit} | ${rs.map((r) => r.docsPerSec.toFixed(0)).join(', ')} | ${d.toFixed(0)} | ${(d / p).toFixed(2)} | ${(med(rs.map((r) => r.peakRssKiB)) / 1024).toFixed(0)} | ${rs[0].cpuMs === undefined ? 'n/a' : (med(rs.map((r) => r.cpuMs)) / 1000).toFixed(1)} | ${(med(rs.map((r) => r.serverCpuMs)) / 1000).toFixed(1)} | ${(med(rs.map((r) => r.ms)) / 1000).toFixed(1)} |`);
}
JS
