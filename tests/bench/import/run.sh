#!/usr/bin/env bash
# Import benchmark: `livesync import` of a vault folder, end to end (a
# whole process: pull the remote's metadata, write the files into a new
# local bbolt store, push), against PouchDB 9 pushing the same documents
# with LiveSync's settings (batch_size 25, batches_limit 25), into the
# relay and into the CouchDB-protocol test server, plain and E2EE.
#
#   tests/bench/import/run.sh     # RUNS=3 NOTES=10000 MODES="plain e2ee" SERVERS="relay couch"
#
# Writes NOTES notes of about 1 KiB (deterministic text, 20 folders),
# imports the folder once per mode into the relay and saves its
# documents (the documents PouchDB then pushes), then RUNS interleaved rounds of, per server and
# mode: `livesync import DIR URL/DB --store NEW.db` into a new database,
# and tests/bench/import/pushdocs.mjs pushing that mode's documents into
# another new database (only the push is timed: the documents are loaded
# into a memory PouchDB first). Prints a table of medians. Then one more
# import per mode into the relay under `strace -f -c -e
# trace=fdatasync,fsync` (when strace is installed). PERF=1 also records
# `perf record -g` of one E2EE import into the relay and prints its top
# symbols. OLD_REV=<commit> also measures the CLI built from that commit
# (its rows are "import@<commit>"). Scratch data lives under WORK (a new
# temporary folder by default; removed unless KEEP=1). Not run in CI.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root="$PWD"

RUNS="${RUNS:-3}"
NOTES="${NOTES:-10000}"
MODES="${MODES:-plain e2ee}"
SERVERS="${SERVERS:-relay couch}"
work="${WORK:-$(mktemp -d -t importbench.XXXXXX)}"
mkdir -p "$work/bin"
results="$work/results.jsonl"
: >"$results"

if [ ! -d tests/pouchdb/node_modules/pouchdb-node ]; then
	(cd tests/pouchdb && npm ci --no-audit --no-fund --loglevel=error)
fi
go build -o "$work/bin/livesync" ./cmd/livesync
go build -o "$work/bin/livesync-relay" ./cmd/livesync-relay
impls="import"
if [ -n "${OLD_REV:-}" ]; then
	mkdir -p "$work/old"
	git archive "$OLD_REV" | tar -x -C "$work/old"
	(cd "$work/old" && go build -o "$work/bin/livesync-old" ./cmd/livesync)
	impls="import import@$OLD_REV"
fi

python3 - "$work/vault" "$NOTES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
words = ("the a of to and in sync vault note chunk relay replica pull push import couch pouch merge conflict "
         "revision document journal bucket passphrase device plugin markdown heading list link tag obsidian "
         "garden meeting project idea draft todo done later review weekly daily summary").split()
rng = random.Random(1)
for i in range(n):
    s = f"# Note {i}\n\n"
    while len(s) < 1000:
        s += " ".join(rng.choice(words) for _ in range(10)) + f" {rng.getrandbits(32)}\n"
    d = os.path.join(root, f"folder{i % 20:02d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"note{i:05d}.md"), "w") as f:
        f.write(s)
PY

. tests/couchserver/start.sh
relay_pid=""
cleanup() {
	couchserver_stop || true
	[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
couchserver_start >/dev/null
couch_url="$LIVESYNC_TEST_COUCHDB_URL" couch_user="$LIVESYNC_TEST_COUCHDB_USER" couch_pass="$LIVESYNC_TEST_COUCHDB_PASSWORD"

relay_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
relay_url="http://127.0.0.1:$relay_port" relay_user=admin relay_pass="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
mkdir -p "$work/relay"
printf 'listen = "127.0.0.1:%s"\ndata_dir = "%s"\n\n[log]\nlevel = "warn"\n\n[[databases]]\nname = "vault"\n' \
	"$relay_port" "$work/relay/data" >"$work/relay/relay.toml"
LIVESYNC_RELAY_ADMIN_USER=admin LIVESYNC_RELAY_ADMIN_PASSWORD="$relay_pass" \
	"$work/bin/livesync-relay" --config "$work/relay/relay.toml" >"$work/relay/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 1 300); do
	curl -fs -u "admin:$relay_pass" "$relay_url/vault" >/dev/null && break
	sleep 0.1
done

url_of() { # server → base URL with the user
	case "$1" in relay) echo "${relay_url/:\/\//://$relay_user@}" ;; couch) echo "${couch_url/:\/\//://$couch_user@}" ;; esac
}
pass_of() { case "$1" in relay) echo "$relay_pass" ;; couch) echo "$couch_pass" ;; esac; }
flags_of() { case "$1" in e2ee) echo "--encrypt" ;; *) echo "" ;; esac; }
drop() { # server db
	case "$1" in
	relay) curl -fs -X DELETE -u "admin:$relay_pass" "$relay_url/$2" >/dev/null || true ;;
	couch) curl -fs -X DELETE -u "$couch_user:$couch_pass" "$couch_url/$2" >/dev/null || true ;;
	esac
}
create() {
	case "$1" in
	relay) curl -fs -X PUT -u "admin:$relay_pass" "$relay_url/$2" >/dev/null ;;
	couch) curl -fs -X PUT -u "$couch_user:$couch_pass" "$couch_url/$2" >/dev/null ;;
	esac
}
: >"$work/none.toml"
export LIVESYNC_PASSPHRASE="import bench passphrase" LIVESYNC_CONFIG="$work/none.toml"
now_ms() { date +%s%3N; }

# livesync_import bin server mode db [prefix command…]: a timed import.
livesync_import() {
	local bin="$1" srv="$2" mode="$3" db="$4"
	shift 4
	rm -f "$work/store.db"
	LIVESYNC_PASSWORD="$(pass_of "$srv")" "$@" "$bin" import "$work/vault" "$(url_of "$srv")/$db" \
		--store "$work/store.db" --quiet --json $(flags_of "$mode") >"$work/out.json"
}

for mode in $MODES; do
	echo "setup: importing $NOTES notes ($mode) into the relay's src-$mode"
	livesync_import "$work/bin/livesync" relay "$mode" "src-$mode"
	curl -fsS -u "admin:$relay_pass" "$relay_url/src-$mode/_all_docs?include_docs=true" >"$work/docs-$mode.json"
	drop relay "src-$mode"
done

for r in $(seq 1 "$RUNS"); do
	for srv in $SERVERS; do
		for mode in $MODES; do
			for impl in $impls; do
				bin="$work/bin/livesync"
				[ "$impl" = import ] || bin="$work/bin/livesync-old"
				db="bench-$r-$mode-$([ "$impl" = import ] && echo new || echo old)"
				t0="$(now_ms)"
				livesync_import "$bin" "$srv" "$mode" "$db"
				t1="$(now_ms)"
				drop "$srv" "$db"
				echo "{\"impl\":\"$impl\",\"server\":\"$srv\",\"mode\":\"$mode\",\"ms\":$((t1 - t0))}" >>"$results"
				echo "  round $r $srv $mode $impl: $((t1 - t0)) ms"
			done
			db="bench-$r-$mode-pouch"
			create "$srv" "$db"
			line="$(TO_USER="$(case $srv in relay) echo admin ;; couch) echo "$couch_user" ;; esac)" \
				TO_PASSWORD="$(pass_of "$srv")" node tests/bench/import/pushdocs.mjs \
				--in "$work/docs-$mode.json" --to "$(case $srv in relay) echo "$relay_url" ;; couch) echo "$couch_url" ;; esac)/$db")"
			drop "$srv" "$db"
			echo "{\"impl\":\"pouchdb\",\"server\":\"$srv\",\"mode\":\"$mode\",\"r\":$line}" >>"$results"
			echo "  round $r $srv $mode pouchdb: $line"
		done
	done
done

node - "$results" "$NOTES" <<'JS'
const fs = require('fs');
const [file, notes] = process.argv.slice(2);
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const groups = {};
for (const x of rows) {
	const ms = x.ms ?? x.r.ms;
	((groups[`${x.server}|${x.mode}`] ||= {})[x.impl] ||= []).push(ms);
}
console.log(`\nimport of ${notes} notes of ~1 KiB, end to end, vs PouchDB 9 pushing the same documents (25/25); medians`);
console.log('| server | vault | client | wall s (runs) | median s | × PouchDB (time ratio) |');
console.log('|---|---|---|---|---|---|');
for (const [k, g] of Object.entries(groups)) {
	const [server, mode] = k.split('|');
	const p = med(g.pouchdb);
	for (const [impl, ms] of Object.entries(g)) {
		console.log(`| ${server} | ${mode} | ${impl} | ${ms.map((m) => (m / 1000).toFixed(2)).join(', ')} | ${(med(ms) / 1000).toFixed(2)} | ${(p / med(ms)).toFixed(2)} |`);
	}
}
JS

if command -v strace >/dev/null; then
	echo
	echo "fdatasync/fsync of one import per mode into the relay (strace -f -c -e trace=fdatasync,fsync):"
	for mode in $MODES; do
		for impl in $impls; do
			bin="$work/bin/livesync"
			[ "$impl" = import ] || bin="$work/bin/livesync-old"
			db="strace-$mode-$([ "$impl" = import ] && echo new || echo old)"
			livesync_import "$bin" relay "$mode" "$db" strace -f -c -e trace=fdatasync,fsync -o "$work/strace.txt"
			drop relay "$db"
			echo "  $mode $impl: $(awk '$NF=="fdatasync"||$NF=="fsync"{printf "%s %s; ", $NF, $4}' "$work/strace.txt")"
		done
	done
fi
if [ -n "${PERF:-}" ] && command -v perf >/dev/null; then
	livesync_import "$work/bin/livesync" relay e2ee perf-e2ee perf record -q -F 999 -g -o "$work/perf.data"
	drop relay perf-e2ee
	echo
	echo "perf: top symbols of one E2EE import into the relay (self time):"
	perf report -i "$work/perf.data" --stdio --no-children --sort symbol 2>/dev/null | grep -E '^ +[0-9]' | head -25
fi
