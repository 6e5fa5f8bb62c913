#!/usr/bin/env bash
# Measurements of the wasm build in headless Chromium (Debian's
# /usr/bin/chromium through playwright-core; no browser is downloaded),
# printed as tables. Benchmarks, not tests; not run in CI.
#
#   bash tests/bench/browser/run.sh            # every section
#   bash tests/bench/browser/run.sh aes        # only AES-GCM (~1.5 min)
#
# Sections (RUNS=3 rounds each, medians):
#   aes    AES-256-GCM on 1 KiB chunks: Go's crypto/aes+cipher in wasm
#          against WebCrypto called from Go through syscall/js (aes.mjs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(aes)
work=$(mktemp -d "${TMPDIR:-/tmp}/browser-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

cd "$here"
if [ ! -d node_modules/playwright-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund --loglevel=error
fi
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
	*)
		echo "unknown section $s (aes)" >&2
		exit 2
		;;
	esac
done
