#!/usr/bin/env bash
# Measurements of the wasm build in headless Chromium (Debian's
# /usr/bin/chromium through playwright-core; no browser is downloaded),
# printed as tables. Benchmarks, not tests; not run in CI.
#
#   bash tests/bench/browser/run.sh            # every section
#   bash tests/bench/browser/run.sh aes        # only AES-GCM (~2 min)
#   bash tests/bench/browser/run.sh vault      # only pull + cold start
#
# Sections (RUNS=3 rounds each, medians):
#   aes    AES-256-GCM on 1 KiB chunks: Go's crypto/aes+cipher in wasm
#          against WebCrypto called from Go through syscall/js (aes.mjs)
#   vault  a 10k-note E2EE vault (DOCS=10000 notes of SIZE=1024 B, made
#          with livesync import) on the relay: its pull into IndexedDB and
#          a cold start that reads one note, livesync.wasm against PouchDB 9
#          + transform-pouch + octagonal-wheels (vaultbench.mjs)
#   profile  (not in the default set) CPU profile of the wasm pull of
#          DOCS=2000 notes and of its cold open, with an unstripped module
#          so Go's function names show (profile.mjs)
# Uses tests/browser/harness.mjs (relay, static server, Chromium).
# POUCH_BATCH=100 adds a PouchDB pull row at the wasm build's page size.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(aes vault)
work=$(mktemp -d "${TMPDIR:-/tmp}/browser-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

cd "$here"
for d in . ../../browser; do
	if [ ! -d "$d/node_modules" ] || [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
		(cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
	fi
done
goroot=$(go env GOROOT)
exec_js="$goroot/lib/wasm/wasm_exec.js"
[ -f "$exec_js" ] || exec_js="$goroot/misc/wasm/wasm_exec.js"
mkdir -p "$work/www"
cp "$exec_js" "$work/www/"
cp pages/*.html "$work/www/"

for s in "${sections[@]}"; do
	case "$s" in
	aes)
		(cd "$root" && GOOS=js GOARCH=wasm go build -trimpath -ldflags='-s -w' -o "$work/www/aesgcm.wasm" ./tests/bench/browser/aesgcm)
		node aes.mjs "$work/www"
		;;
	vault)
		npx esbuild src/pouch-entry.mjs --bundle --format=iife --minify --log-level=warning --outfile="$work/www/pouch.js"
		node vaultbench.mjs "$work/www"
		;;
	profile)
		npx esbuild src/pouch-entry.mjs --bundle --format=iife --minify --log-level=warning --outfile="$work/www/pouch.js"
		mkdir -p "$work/wasm"
		(cd "$root" && GOOS=js GOARCH=wasm go build -trimpath -o "$work/wasm/livesync.wasm" ./wasm/)
		cp "$exec_js" "$root/wasm/js/index.mjs" "$work/wasm/"
		LIVESYNC_TEST_WASM_DIR="$work/wasm" DOCS="${DOCS:-2000}" node profile.mjs "$work/www"
		;;
	*)
		echo "unknown section $s (aes, vault, profile)" >&2
		exit 2
		;;
	esac
done
