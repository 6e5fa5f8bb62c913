#!/usr/bin/env bash
# Builds the Worker and fails if it does not fit the Workers Free plan:
# Cloudflare limits a Worker to 3 MB after compression (10 MB on the paid
# plan). The upload is compressed by wrangler; gzip -9 of app.wasm plus
# its JavaScript stands for it here. With WORKERS_TAGS=upstreams the
# build has upstream bridging and must fit the paid plan's 10 MB.
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
limit=3000000 plan="Workers Free plan"
case " ${WORKERS_TAGS:-} " in
*" upstreams "*) limit=10000000 plan="Workers Paid plan" ;;
esac
gz=$(cat dist/app.wasm dist/worker.mjs dist/runtime.mjs dist/wasm_exec.js | gzip -9 | wc -c)
if [ "$gz" -gt "$limit" ]; then
	echo "wasm/workers: $gz bytes gzip, over the $plan limit of $limit bytes" >&2
	exit 1
fi
echo "wasm/workers${WORKERS_TAGS:+ (tags $WORKERS_TAGS)}: $gz bytes gzip with its JavaScript, within the $plan limit of $limit bytes"
