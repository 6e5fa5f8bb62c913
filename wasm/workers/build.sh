#!/usr/bin/env bash
# Builds the Worker into wasm/workers/dist/: app.wasm (GOOS=js) and the
# JavaScript that loads it (worker.mjs, runtime.mjs, wasm_exec.js), made
# by github.com/syumai/workers' workers-assets-gen at the version go.mod
# names: a Go instance per request. LIVESYNC_WORKER_LOADER=isolate puts
# loader/worker.mjs in place of its worker.mjs: one Go instance per
# isolate serving every request (faster, not yet the default: see
# README). Prints the sizes; size.sh enforces the limit.
set -euo pipefail
cd "$(dirname "$0")"
out=dist
go run github.com/syumai/workers/cmd/workers-assets-gen -mode=go -o "$out"
case "${LIVESYNC_WORKER_LOADER:-request}" in
request) ;;
isolate) cp loader/worker.mjs "$out/worker.mjs" ;;
*) echo "build.sh: LIVESYNC_WORKER_LOADER is request (the default) or isolate" >&2; exit 2 ;;
esac
GOOS=js GOARCH=wasm go build -trimpath -ldflags="-s -w" -o "$out/app.wasm" .
raw=$(wc -c <"$out/app.wasm")
gz=$(gzip -9 -c "$out/app.wasm" | wc -c)
awk -v raw="$raw" -v gz="$gz" 'BEGIN { printf "wasm/workers/dist/app.wasm: %d bytes raw (%.2f MB), %d bytes gzip -9 (%.2f MB)\n", raw, raw/1e6, gz, gz/1e6 }'
