// Pull and cold start of a 10k-note E2EE vault in headless Chromium: the
// wasm build (livesync.wasm, IndexedDB storage) against the stack LiveSync
// uses today (PouchDB 9 browser build, idb adapter, transform-pouch +
// octagonal-wheels for E2EE), from the same relay (cmd/livesync-relay).
//
//   node vaultbench.mjs WWW_DIR      (WWW_DIR holds pouch.html, pouch.js, wasm.html)
//
// pull: RUNS rounds, the two clients alternating (the first of a round
// alternates too), each into a new IndexedDB database of one browser
// profile, timed from the start of the replication (reading the sync
// parameters, key derivation included) to its end.
// cold: RUNS rounds of a fresh browser process over the profile per
// client: page load → module/script ready → replica opened from
// IndexedDB (and, in the "remote" mode, ready to sync: the remote's sync
// parameters and milestone read, the key derived) → first note read
// (checked byte for byte).
import { startRelay, serveStatic, buildWasm, launchPersistent, tempDir } from "../../browser/harness.mjs";
import { prepareVault, passphrase, noteText, notePath } from "./vault.mjs";
import { median, fmt, table } from "./lib.mjs";

const www = process.argv[2];
const runs = Number(process.env.RUNS ?? 3);
const docs = Number(process.env.DOCS ?? 10000);
const size = Number(process.env.SIZE ?? 1024);
const sections = (process.env.SECTIONS ?? "pull,cold").split(",");
const wasmStorage = process.env.WASM_STORAGE ?? "indexeddb";
// POUCH_BATCH=100 adds a PouchDB row with that batch_size (batches_limit 25),
// the wasm build's page size, to tell batching from the rest.
const pouchBatch = Number(process.env.POUCH_BATCH ?? 0);

const relay = await startRelay();
const server = await serveStatic({ "/": www, "/wasm/": await buildWasm() });
const profile = tempDir("browser-bench-profile-");
try {
  console.error(`importing ${docs} notes of ${size} B into the relay (livesync import --encrypt --obfuscate-paths) …`);
  const vault = await prepareVault(relay, { docs, size });
  const info = await (await fetch(vault.url, { headers: { authorization: "Basic " + btoa(`${relay.user}:${relay.password}`) } })).json();
  console.error(`  ${info.doc_count} documents in ${fmt(vault.importMs / 1000, 1)} s`);
  const common = { url: vault.url, user: relay.user, password: relay.password, passphrase };

  const pulls = { pouchdb: [], wasm: [], pouchBig: [] };
  const pulled = {};
  const ctx = await launchPersistent(profile);
  try {
    for (let r = 0; r < runs; r++) {
      const order = r % 2 === 0 ? ["wasm", "pouchdb"] : ["pouchdb", "wasm"];
      if (pouchBatch) order.push("pouchBig");
      for (const impl of order) {
        if (!sections.includes("pull") && r > 0) continue;
        const name = `${impl}-${r}`;
        const page = await ctx.newPage();
        page.on("pageerror", (e) => console.error(`[${impl}] ${e.message}`));
        await page.goto(server.url(impl === "wasm" ? "/wasm.html" : "/pouch.html"));
        const batch = impl === "pouchBig" ? { batchSize: pouchBatch } : {};
        await page.waitForFunction(() => window.ready === true || window.benchError);
        const x = impl === "wasm"
          ? await page.evaluate((o) => wasmPull(o), { ...common, name, storage: wasmStorage })
          : await page.evaluate((o) => PouchBench.pull(o), { ...common, name, ...batch });
        await page.close();
        pulled[impl] ??= name;
        pulls[impl].push(x);
        console.error(`pull ${r + 1}/${runs} ${impl}: ${fmt(x.ms / 1000, 1)} s${x.openMs ? ` (open ${fmt(x.openMs)} ms)` : ""} ${JSON.stringify(x.docs ?? x.result?.pull ?? x.files)}`);
      }
    }
  } finally {
    await ctx.close();
  }
  if (sections.includes("pull")) {
    printPulls(pulls, info.doc_count);
  }

  if (sections.includes("cold") && wasmStorage === "indexeddb") {
    await coldStarts(pulled, { url: vault.url, user: relay.user, password: relay.password }, info.doc_count);
  }
} finally {
  await server.stop();
  await relay.stop();
}

// coldStarts runs RUNS rounds of cold starts, each in a fresh browser
// process over the profile, of both clients in two modes: local (open the
// replica, read a note) and remote (also get ready to sync: the remote's
// parameters and milestone, key derivation); prints the table.
async function coldStarts(pulled, remote, docCount) {
  const want = noteText(0, size);
  const modes = ["local", "remote"];
  const cold = {};
  for (let r = 0; r < runs; r++) {
    for (const mode of modes) {
      for (const impl of r % 2 === 0 ? ["wasm", "pouchdb"] : ["pouchdb", "wasm"]) {
        const args = { name: pulled[impl], passphrase, path: notePath(0), ...(mode === "remote" ? { remote } : {}) };
        const c = await launchPersistent(profile);
        try {
          const page = await c.newPage();
          await page.goto(server.url(impl === "wasm" ? "/wasm.html" : "/pouch.html") + "#cold=" + encodeURIComponent(JSON.stringify(args)));
          await page.waitForFunction(() => window.benchResult || window.benchError, null, { timeout: 120000 });
          const { res, err } = await page.evaluate(() => ({ res: window.benchResult, err: window.benchError }));
          if (err) throw new Error(`${impl} cold start: ${err}`);
          if (res.text !== want) throw new Error(`${impl} cold start read the wrong text (${res.bytes} bytes)`);
          (cold[`${impl}|${mode}`] ??= []).push(res.t);
          console.error(`cold ${r + 1}/${runs} ${impl} ${mode}: ${JSON.stringify(res.t)}`);
        } finally {
          await c.close();
        }
      }
    }
  }
  const m = (key, k) => fmt(median(cold[key].map((t) => t[k])));
  console.log(`\nCold start of a fresh browser process over a profile holding the pulled vault (${docCount} documents), ms from navigation start, medians of ${runs}`);
  const rows = [];
  for (const mode of modes) {
    const what = mode === "local" ? "open replica" : "open replica + remote ready (params, milestone, key derivation)";
    rows.push([`PouchDB 9 (idb) + octagonal-wheels`, what, m(`pouchdb|${mode}`, "script"), "(in script)", m(`pouchdb|${mode}`, "open"), m(`pouchdb|${mode}`, "read")]);
    rows.push([`livesync.wasm (indexeddb)`, mode === "local" ? what : "open() with remote (handshake, key derivation)", m(`wasm|${mode}`, "script"), m(`wasm|${mode}`, "load"), m(`wasm|${mode}`, "open"), m(`wasm|${mode}`, "read")]);
  }
  console.log(table(["client", "steps", "script ready", "module loaded", "opened", "first note read (total)"], rows));
}

// printPulls prints the pull table. The machine is shared, so besides the
// ratio of medians it gives the median of the per-round ratios (each
// round's pulls ran back to back, under about the same load).
function printPulls(pulls, docCount) {
  const base = pulls.pouchdb.map((x) => x.ms);
  const p = median(base);
  const row = (label, xs) => {
    const ms = xs.map((x) => x.ms);
    const m = median(ms);
    return [label, ms.map((v) => fmt(v / 1000, 1)).join(", "), fmt(m / 1000, 1), fmt(docCount / (m / 1000)), fmt(p / m, 2),
      fmt(median(ms.map((v, i) => base[i] / v)), 2)];
  };
  console.log(`\nPull of ${docs} E2EE notes (${size} B, ${docCount} documents with chunks) from the relay into IndexedDB, headless Chromium, medians of ${runs}`);
  console.log(table(["client", "runs (s)", "median s", "docs/s", "× PouchDB (medians)", "× PouchDB (per round)"], [
    row("PouchDB 9 (idb) + transform-pouch + octagonal-wheels, batch 25/25 (LiveSync's)", pulls.pouchdb),
    row(`livesync.wasm (${wasmStorage}), defaults (batch 100)`, pulls.wasm),
    ...(pouchBatch ? [row(`PouchDB, batch ${pouchBatch}/25`, pulls.pouchBig)] : []),
  ]));
}
