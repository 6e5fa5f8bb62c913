#!/usr/bin/env bash
# Checks the example plugin: installs its pinned dev dependencies
# (npm ci), type-checks it against Obsidian's API (tsc --noEmit) and
# bundles main.js with esbuild (CommonJS, "obsidian" external). Any error
# or esbuild warning fails it. Needs Node, npm and Go (for wasm_exec.js).
#
# To try the plugin, copy main.js, manifest.json and wasm/dist/livesync.wasm
# (bash wasm/build.sh) into <vault>/.obsidian/plugins/livesync-go-example/.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npx --no-install tsc --noEmit -p .
node esbuild.config.mjs
echo "example-plugin: type-check and bundle ok ($(wc -c <main.js) bytes main.js)"
