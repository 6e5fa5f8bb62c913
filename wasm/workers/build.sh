#!/usr/bin/env bash
# Builds the Worker into wasm/workers/dist/: app.wasm (GOOS=js) and the
# JavaScript that loads it (worker.mjs, runtime.mjs, wasm_exec.js), made
# by github.com/syumai/workers' workers-assets-gen at the version go.mod
# names. Prints the sizes; size.sh enforces the limit.
set -euo pipefail
cd "$(dirname "$0")"
out=dist
go run github.com/syumai/workers/cmd/workers-assets-gen -mode=go -o "$out"
GOOS=js GOARCH=wasm go build -trimpath -ldflags="-s -w" -o "$out/app.wasm" .
raw=$(wc -c <"$out/app.wasm")
gz=$(gzip -9 -c "$out/app.wasm" | wc -c)
awk -v raw="$raw" -v gz="$gz" 'BEGIN { printf "wasm/workers/dist/app.wasm: %d bytes raw (%.2f MB), %d bytes gzip -9 (%.2f MB)\n", raw, raw/1e6, gz, gz/1e6 }'
