// CPU profile of the wasm build's pull into IndexedDB and of its cold open,
// in headless Chromium (Chrome DevTools Protocol Profiler): the functions
// with the most self time. Build the module unstripped so that Go's
// function names are in it:
//
//   GOOS=js GOARCH=wasm go build -trimpath -o DIR/livesync.wasm ./wasm/   (+ wasm_exec.js, index.mjs)
//   LIVESYNC_TEST_WASM_DIR=DIR DOCS=2000 node profile.mjs WWW_DIR
//
// (run.sh profile does this.)
import { startRelay, serveStatic, buildWasm, launchPersistent, tempDir } from "../../browser/harness.mjs";
import { prepareVault, passphrase, notePath } from "./vault.mjs";
import { fmt, table } from "./lib.mjs";

const www = process.argv[2];
const docs = Number(process.env.DOCS ?? 2000);
const top = Number(process.env.TOP ?? 25);
const relay = await startRelay();
const server = await serveStatic({ "/": www, "/wasm/": await buildWasm() });
const profile = tempDir("browser-bench-profile-");
try {
  const vault = await prepareVault(relay, { docs });
  const common = { url: vault.url, user: relay.user, password: relay.password, passphrase };
  let ctx = await launchPersistent(profile);
  try {
    const page = await ctx.newPage();
    await page.goto(server.url("/wasm.html"));
    await page.waitForFunction(() => window.ready === true);
    await page.evaluate(() => (window.lib = null));
    const r = await profiled(ctx, page, () => page.evaluate((o) => wasmPull(o), { ...common, name: "p" }));
    console.log(`\nwasm pull of ${docs} notes (${r.value.result.pull.written} documents) in ${fmt(r.value.ms / 1000, 1)} s: top ${top} functions by self time`);
    console.log(table(["function", "self ms", "%"], r.rows));
  } finally {
    await ctx.close();
  }
  ctx = await launchPersistent(profile);
  try {
    const page = await ctx.newPage();
    const cdp = await ctx.newCDPSession(page);
    await cdp.send("Profiler.enable");
    await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
    await cdp.send("Profiler.start");
    await page.goto(server.url("/wasm.html") + "#cold=" + encodeURIComponent(JSON.stringify({ name: "p", passphrase, path: notePath(0) })));
    await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 120000 });
    const { profile: prof } = await cdp.send("Profiler.stop");
    const t = await page.evaluate(() => window.benchResult?.t ?? window.benchError);
    console.log(`\nwasm cold open + read (${JSON.stringify(t)}): top ${top} functions by self time`);
    console.log(table(["function", "self ms", "%"], selfTimes(prof)));
  } finally {
    await ctx.close();
  }
} finally {
  await server.stop();
  await relay.stop();
}

async function profiled(ctx, page, fn) {
  const cdp = await ctx.newCDPSession(page);
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
  await cdp.send("Profiler.start");
  const value = await fn();
  const { profile: prof } = await cdp.send("Profiler.stop");
  return { value, rows: selfTimes(prof) };
}

// selfTimes sums the samples' time per function name (self time).
function selfTimes(prof) {
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let total = 0;
  for (let i = 0; i < prof.samples.length; i++) {
    const n = byId.get(prof.samples[i]);
    const dt = (prof.timeDeltas[i] ?? 0) / 1000;
    const name = n.callFrame.functionName || `(${n.callFrame.url.split("/").pop() || "anonymous"})`;
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
  }
  return [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
    .map(([name, ms]) => [name.replaceAll("|", "\\\\|"), fmt(ms), fmt((100 * ms) / total, 1)]);
}
