#!/usr/bin/env bash
# Builds the Worker into wasm/workers/dist/: app.wasm (GOOS=js) and the
# JavaScript that loads it: runtime.mjs and wasm_exec.js made by
# github.com/syumai/workers' workers-assets-gen at the version go.mod
# names, and loader/worker.mjs in place of its worker.mjs: one Go
# instance per isolate serving every request and cron event.
# LIVESYNC_WORKER_LOADER=request keeps syumai's worker.mjs instead (a
# fresh Go instance per event: slower, ~50 ms of CPU each).
# WORKERS_TAGS=upstreams builds the Worker with upstream bridging and the
# cron hunt (the Paid plan's 10 MB; without it the Worker fits the Free
# plan's 3 MB). Prints the sizes; size.sh enforces the limit.
set -euo pipefail
cd "$(dirname "$0")"
out=dist
go run github.com/syumai/workers/cmd/workers-assets-gen -mode=go -o "$out"
case "${LIVESYNC_WORKER_LOADER:-isolate}" in
isolate) cp loader/worker.mjs "$out/worker.mjs" ;;
request) ;;
*) echo "build.sh: LIVESYNC_WORKER_LOADER is isolate (the default) or request" >&2; exit 2 ;;
esac
GOOS=js GOARCH=wasm go build -trimpath -ldflags="-s -w" -tags "${WORKERS_TAGS:-}" -o "$out/app.wasm" .
raw=$(wc -c <"$out/app.wasm")
gz=$(gzip -9 -c "$out/app.wasm" | wc -c)
awk -v raw="$raw" -v gz="$gz" 'BEGIN { printf "wasm/workers/dist/app.wasm: %d bytes raw (%.2f MB), %d bytes gzip -9 (%.2f MB)\n", raw, raw/1e6, gz, gz/1e6 }'
