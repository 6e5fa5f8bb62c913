#!/bin/sh
# run.sh — side-by-side E2EE V2 benchmark: livesync-go engine/e2ee against
# octagonal-wheels, the JavaScript crypto library LiveSync itself uses.
#
#   tests/bench/e2ee/run.sh            (RUNS=3 by default; BENCH_MIN_SECONDS=1.5)
#
# 1. JS encrypts chunks of 256 B, 1 KiB and 1 MiB with the library ("%=").
# 2. Go decrypts every one of them (checking the plaintexts), writes its own
#    ciphertexts, and times key derivation and decryption.
# 3. JS decrypts all of Go's ciphertexts (checking them) and times the same.
# Steps 2 and 3 repeat RUNS times, one after the other (never at the same
# time); the table shows the median of each measurement.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
runs=${RUNS:-3}
min=${BENCH_MIN_SECONDS:-1.5}
work=$(mktemp -d "${TMPDIR:-/tmp}/e2ee-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

cd "$here"
[ -d node_modules/octagonal-wheels ] || npm ci --no-audit --no-fund >/dev/null
(cd "$root" && go build -o "$work/gobench" ./tests/bench/e2ee/gobench)
node bench.mjs gen "$work"
i=1
while [ "$i" -le "$runs" ]; do
	echo "run $i/$runs: go" >&2
	"$work/gobench" -dir "$work" -min "${min}s" >>"$work/go.jsonl"
	echo "run $i/$runs: js" >&2
	BENCH_MIN_SECONDS=$min node bench.mjs bench "$work" >>"$work/js.jsonl"
	i=$((i + 1))
done
grep -h '"verif' "$work/go.jsonl" | tail -1 >&2
grep -h '"verif' "$work/js.jsonl" | tail -1 >&2
node table.mjs "$work/go.jsonl" "$work/js.jsonl"
if [ -n "${RESULTS_OUT:-}" ]; then cat "$work/go.jsonl" "$work/js.jsonl" >"$RESULTS_OUT"; fi
