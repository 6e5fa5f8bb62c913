#!/usr/bin/env bash
# The benchmark table: livesync-go against PouchDB 9 and octagonal-wheels,
# all measured in one run on this machine, printed as a markdown table of
# ratios with the goals (main.go says what each row measures).
#
#   tests/bench/table/run.sh                # full form: NOTES=2000 (~10,000 docs) RUNS=3 SCALE=1000,10000,100000
#   SMALL=1 tests/bench/table/run.sh        # small form (CI): NOTES=200 (~1,000 docs) RUNS=1 SCALE=1000,10000
#
# Env: NOTES, RUNS, SCALE, SCALEOUT_NOTES, E2EE_RUNS, E2EE_MIN_SECONDS,
# SKIP (comma list of pull,push,import,e2ee,splithash,scaleout,scale), BUDGET (e.g.
# 150s: no section starts after that long; the first round always runs),
# RESULTS_OUT (a file: every measurement by key, as JSON). Starts the
# CouchDB-protocol test server unless LIVESYNC_TEST_COUCHDB_URL and
# COUCHSERVER_PID name one; the relay is started on a temporary data
# folder. The table goes to stdout, progress to stderr.
set -euo pipefail
cd "$(dirname "$0")/../../.."

if [ -n "${SMALL:-}" ]; then
	: "${NOTES:=200}" "${RUNS:=1}" "${SCALE:=1000,10000}" "${SCALEOUT_NOTES:=100}" "${E2EE_RUNS:=1}" "${E2EE_MIN_SECONDS:=0.3}"
fi
NOTES="${NOTES:-2000}"
RUNS="${RUNS:-3}"
SCALE="${SCALE:-1000,10000,100000}"
SCALEOUT_NOTES="${SCALEOUT_NOTES:-300}"
E2EE_RUNS="${E2EE_RUNS:-3}"
E2EE_MIN_SECONDS="${E2EE_MIN_SECONDS:-1.5}"

for dir in tests/pouchdb tests/couchserver tests/bench/e2ee; do
	if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
	fi
done
work="$(mktemp -d -t benchtable.XXXXXX)"
cleanup() {
	if declare -F couchserver_stop >/dev/null; then couchserver_stop; fi
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/bin"
go build -o "$work/bin/" ./cmd/livesync ./cmd/livesync-relay ./tests/bench/pull/gopull
go build -o "$work/bin/scaleoutbench" ./tests/bench/scaleout
go build -o "$work/bin/benchtable" ./tests/bench/table
go build -o "$work/bin/splithash" ./tests/bench/table/splithash
if [ -z "${LIVESYNC_TEST_COUCHDB_URL:-}" ] || [ -z "${COUCHSERVER_PID:-}" ]; then
	. tests/couchserver/start.sh
	couchserver_start >&2
fi
"$work/bin/benchtable" -bin "$work/bin" -work "$work" -notes "$NOTES" -runs "$RUNS" -scale "$SCALE" \
	-scaleout-notes "$SCALEOUT_NOTES" -e2ee-runs "$E2EE_RUNS" -e2ee-min "$E2EE_MIN_SECONDS" -skip "${SKIP:-}" -budget "${BUDGET:-0}" -results "${RESULTS_OUT:-}"
