// Bundles the plugin into main.js as Obsidian loads it: CommonJS,
// "obsidian" external, the loader (livesync-go-wasm) and Go's
// wasm_exec.js inside. livesync.wasm is not bundled: it ships beside
// main.js and the plugin reads it from its folder.
//
//   node esbuild.config.mjs            → main.js
//   node esbuild.config.mjs --watch
//
// wasm_exec.js comes from the Go installation (`go env GOROOT`), or from
// $WASM_EXEC_JS; it must be the one of the Go that built livesync.wasm.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import esbuild from "esbuild";

function wasmExecJS() {
  if (process.env.WASM_EXEC_JS) {
    return path.resolve(process.env.WASM_EXEC_JS);
  }
  const root = execFileSync("go", ["env", "GOROOT"], { encoding: "utf8" }).trim();
  for (const p of [path.join(root, "lib/wasm/wasm_exec.js"), path.join(root, "misc/wasm/wasm_exec.js")]) {
    if (existsSync(p)) {
      return p;
    }
  }
  throw new Error(`wasm_exec.js not found under ${root}`);
}

// The loader imports "./wasm_exec.js" next to itself (as it is shipped in
// wasm/dist); here it resolves to the Go installation's copy.
const goRuntime = {
  name: "wasm_exec",
  setup(build) {
    const file = wasmExecJS();
    build.onResolve({ filter: /^\.\/wasm_exec\.js$/ }, () => ({ path: file }));
  },
};

const watch = process.argv.includes("--watch");
const ctx = await esbuild.context({
  entryPoints: ["src/main.ts"],
  outfile: "main.js",
  bundle: true,
  format: "cjs",
  platform: "browser",
  target: "es2022",
  // Obsidian provides these at run time. The loader's node: imports run
  // only in Node, never in the app (the plugin passes the module's bytes).
  external: ["obsidian", "electron", "@codemirror/*", "node:*"],
  // The loader's default wasm URL is relative to import.meta.url, which
  // CommonJS lacks; the plugin always passes the bytes.
  define: { "import.meta.url": "undefined" },
  logLevel: "warning",
  sourcemap: watch ? "inline" : false,
  minify: !watch,
  plugins: [goRuntime],
});
if (watch) {
  await ctx.watch();
} else {
  const result = await ctx.rebuild();
  await ctx.dispose();
  if (result.errors.length || result.warnings.length) {
    process.exit(1);
  }
}
