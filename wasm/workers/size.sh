#!/usr/bin/env bash
# Builds the Worker and fails if it does not fit the Workers Free plan:
# Cloudflare limits a Worker to 3 MB after compression (10 MB on the paid
# plan). The upload is compressed by wrangler; gzip -9 of app.wasm plus
# its JavaScript stands for it here.
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
limit=3000000
gz=$(cat dist/app.wasm dist/worker.mjs dist/runtime.mjs dist/wasm_exec.js | gzip -9 | wc -c)
if [ "$gz" -gt "$limit" ]; then
	echo "wasm/workers: $gz bytes gzip, over the Workers Free plan limit of $limit (3 MB); the paid plan allows 10 MB" >&2
	exit 1
fi
echo "wasm/workers: $gz bytes gzip with its JavaScript, within the Workers Free plan limit of $limit"
