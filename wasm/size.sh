#!/usr/bin/env bash
# Builds the four variants of livesync.wasm, shrinks each with wasm-opt
# when that makes it smaller, checks that each still loads and runs
# (variant-check.mjs), prints their sizes (raw, gzip -9, brotli -q 11) and
# fails when one is over its budget (brotli bytes):
#
#   core   -tags nocouchdb,nos3   engine, storage, no remote   ≤ 1,200,000
#   couch  -tags nos3             core + the CouchDB remote    (no budget)
#   full   (no tags)              core + CouchDB and S3        ≤ 3,000,000
#   p2p    -tags p2p              full + LiveSync P2P          ≤ 3,100,000
#
# Needs go, node, gzip, brotli and wasm-opt (binaryen; Debian's 108 works).
# SIZE_OUT=DIR keeps the modules there (default: a temporary folder);
# SIZE_WASM_OPT=0 skips wasm-opt (one to three minutes per variant);
# SIZE_BUDGET_CORE, SIZE_BUDGET_FULL and SIZE_BUDGET_P2P replace the
# budgets.
set -euo pipefail
cd "$(dirname "$0")"
. ./buildflags.sh

budget_core=${SIZE_BUDGET_CORE:-1200000}
budget_full=${SIZE_BUDGET_FULL:-3000000}
budget_p2p=${SIZE_BUDGET_P2P:-3100000}

for tool in go node gzip brotli; do
	command -v "$tool" >/dev/null || { echo "size.sh: $tool is not installed" >&2; exit 2; }
done
use_opt=${SIZE_WASM_OPT:-1}
if [ "$use_opt" != 0 ] && ! command -v wasm-opt >/dev/null; then
	echo "size.sh: wasm-opt (binaryen) is not installed; set SIZE_WASM_OPT=0 to measure without it" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=${SIZE_OUT:-$tmp/out}
mkdir -p "$out" "$tmp/loader"
root=$(go env GOROOT)
exec_js="$root/lib/wasm/wasm_exec.js"
[ -f "$exec_js" ] || exec_js="$root/misc/wasm/wasm_exec.js"
cp "$exec_js" js/index.mjs "$tmp/loader/"

br() { brotli -q 11 -c "$1" | wc -c; }

# Go's wasm output uses sign extension, saturating float conversions and
# bulk memory; wasm-opt must be told, as Go writes no target_features.
opt_flags=(-Oz --enable-sign-ext --enable-nontrapping-float-to-int --enable-bulk-memory --enable-mutable-globals)

rows=()
failed=0
for spec in core:nocouchdb,nos3 couch:nos3 full: p2p:p2p; do
	name=${spec%%:*} tags=${spec#*:}
	mod="$out/livesync-$name.wasm"
	wasm_build "$mod" "$tags"
	node variant-check.mjs "$tmp/loader" "$mod" "$name" >/dev/null
	note="wasm-opt skipped"
	b=$(br "$mod")
	if [ "$use_opt" != 0 ]; then
		wasm-opt "${opt_flags[@]}" "$mod" -o "$tmp/opt.wasm"
		after=$(br "$tmp/opt.wasm")
		if [ "$after" -lt "$b" ] && node variant-check.mjs "$tmp/loader" "$tmp/opt.wasm" "$name" >/dev/null; then
			mv "$tmp/opt.wasm" "$mod"
			note="wasm-opt -Oz kept (brotli $b → $after)"
			b=$after
		else
			note="wasm-opt -Oz not kept (brotli $b → $after)"
		fi
	fi
	raw=$(wc -c <"$mod")
	gz=$(gzip -9 -c "$mod" | wc -c)
	budget=-
	case $name in
	core) budget=$budget_core ;;
	full) budget=$budget_full ;;
	p2p) budget=$budget_p2p ;;
	esac
	verdict=ok
	if [ "$budget" != - ] && [ "$b" -gt "$budget" ]; then
		verdict=OVER
		failed=1
	fi
	rows+=("$name|${tags:-(none)}|$raw|$gz|$b|$budget|$verdict|$note")
done

printf '%-6s %-15s %12s %12s %12s %12s  %-5s %s\n' variant tags raw "gzip -9" "brotli -q11" budget "" wasm-opt
for r in "${rows[@]}"; do
	IFS='|' read -r name tags raw gz b budget verdict note <<<"$r"
	printf '%-6s %-15s %12s %12s %12s %12s  %-5s %s\n' "$name" "$tags" "$raw" "$gz" "$b" "$budget" "$verdict" "$note"
done
if [ "$failed" != 0 ]; then
	echo "size.sh: a module is over its brotli budget" >&2
	exit 1
fi
