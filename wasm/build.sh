#!/usr/bin/env bash
# Builds the wasm module and its loader into wasm/dist/, one folder a
# plugin can ship: livesync.wasm, Go's wasm_exec.js (copied unchanged from
# the Go installation), the loader index.mjs with its types (index.d.ts)
# and package.json; prints the module's raw and gzip sizes. This is the
# full module (CouchDB and S3 remotes); next to it livesync-p2p.wasm, the
# full module with LiveSync P2P (vault.p2p(); load it with
# load({wasm: url of livesync-p2p.wasm})). size.sh builds and measures
# the smaller variants.
set -euo pipefail
cd "$(dirname "$0")"
out=dist
mkdir -p "$out"
. ./buildflags.sh
wasm_build "$out/livesync.wasm" ""
wasm_build "$out/livesync-p2p.wasm" p2p
root=$(go env GOROOT)
exec_js="$root/lib/wasm/wasm_exec.js"
[ -f "$exec_js" ] || exec_js="$root/misc/wasm/wasm_exec.js"
cp "$exec_js" "$out/wasm_exec.js"
cp js/index.mjs js/index.d.ts js/package.json js/README.md "$out/"
for m in livesync livesync-p2p; do
	raw=$(wc -c <"$out/$m.wasm")
	gz=$(gzip -9 -c "$out/$m.wasm" | wc -c)
	awk -v m="$m" -v raw="$raw" -v gz="$gz" 'BEGIN { printf "wasm/dist/%s.wasm: %d bytes raw (%.2f MB), %d bytes gzip -9 (%.2f MB)\n", m, raw, raw/1e6, gz, gz/1e6 }'
done
