// The example plugin's sync logic (wasm/example-plugin/src/mirror.ts and
// its requestUrl adapter, bundled by esbuild for the browser) in headless
// Chromium, against livesync-relay: the engine's vault in IndexedDB,
// mirrored to a small in-page stand-in for Obsidian's vault, live-synced
// through a stand-in for requestUrl (whole bodies, no streaming, no
// abort). A Node-side client of the same vault is the other device.
//
// Needs `npm ci` in wasm/example-plugin (its esbuild; check.sh does it)
// and in tests/browser.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import path from "node:path";
import { freshName, launchBrowser, newPage, repoRoot, serveStatic, buildWasm, startRelay, couchFetch, tempDir } from "./harness.mjs";
import { nodeLivesync } from "./vault.mjs";

const pluginDir = path.join(repoRoot, "wasm/example-plugin");
const passphrase = "example plugin passphrase";

// The page module: the example's Mirror and requestUrlFetch, and the
// stand-ins for Obsidian's vault and requestUrl.
const entry = `
export { Mirror } from "./src/mirror";
export { requestUrlFetch } from "./src/requesturl";

// MemoryFiles stands in for Obsidian's vault: files in a Map, and vault
// events delivered after the write that caused them, as Obsidian does.
// Every write and removal is logged, whoever made it.
export class MemoryFiles {
  files = new Map();
  log = [];
  listeners = new Set();
  async list() {
    return [...this.files].map(([path, f]) => ({ path, mtime: f.mtime, size: f.data.length }));
  }
  async read(path) {
    const f = this.files.get(path);
    return f ? f.data.slice() : null;
  }
  async stat(path) {
    const f = this.files.get(path);
    return f ? { path, mtime: f.mtime, size: f.data.length } : null;
  }
  async write(path, data, mtime) {
    this.put(path, data, mtime, "mirror");
  }
  async remove(path) {
    this.del(path, "mirror");
  }
  watch(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
  // The user's own edits.
  userWrite(path, text) {
    this.put(path, new TextEncoder().encode(text), Date.now(), "user");
  }
  userDelete(path) {
    this.del(path, "user");
  }
  put(path, data, mtime, by) {
    const kind = this.files.has(path) ? "modified" : "created";
    this.files.set(path, { data: data.slice(), mtime });
    this.log.push({ op: "write", path, by });
    this.emit({ kind, path });
  }
  del(path, by) {
    if (this.files.delete(path)) {
      this.log.push({ op: "delete", path, by });
      this.emit({ kind: "deleted", path });
    }
  }
  emit(change) {
    setTimeout(() => this.listeners.forEach((fn) => fn(change)), 0);
  }
}

// standInRequestUrl behaves as Obsidian's requestUrl does for the
// adapter: the whole body at once, headers as a plain object, never
// aborted, 4xx and 5xx resolved (throw: false).
export function standInRequestUrl(counter) {
  return async (req) => {
    counter.requests++;
    const headers = { ...req.headers };
    if (req.contentType) {
      headers["content-type"] = req.contentType;
    }
    const res = await fetch(req.url, { method: req.method ?? "GET", headers, body: req.body });
    const arrayBuffer = await res.arrayBuffer();
    const h = {};
    res.headers.forEach((v, k) => (h[k] = v));
    return { status: res.status, headers: h, arrayBuffer, json: undefined, text: "" };
  };
}
`;

async function bundleExample() {
  const require = createRequire(path.join(pluginDir, "package.json"));
  let esbuild;
  try {
    esbuild = require("esbuild");
  } catch (err) {
    throw new Error(`esbuild is not installed in wasm/example-plugin: run its check.sh (npm ci) first: ${err.message}`);
  }
  const out = tempDir("livesync-example-bundle-");
  await esbuild.build({
    stdin: { contents: entry, resolveDir: pluginDir, sourcefile: "example-entry.mjs", loader: "js" },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    outfile: path.join(out, "example.mjs"),
    logLevel: "error",
  });
  return out;
}

let site, relay, browser, node;

before(async () => {
  const [wasmDir, bundleDir] = await Promise.all([buildWasm(), bundleExample()]);
  site = await serveStatic({ "/": path.join(repoRoot, "tests/browser/page"), "/wasm/": wasmDir, "/example/": bundleDir });
  relay = await startRelay({ corsOrigins: [site.origin] });
  browser = await launchBrowser();
  node = await nodeLivesync();
});

after(async () => {
  await browser?.close();
  await node?.exit();
  await relay?.stop();
  await site?.stop();
});

const sha256 = (b) => createHash("sha256").update(b).digest("hex");

// pulled reads path from the Node client after pulling, until want(value)
// holds; value is the text, or null for a file that is absent or deleted.
async function pulled(client, path, want, what) {
  let last;
  for (let i = 0; i < 150; i++) {
    await client.pull();
    const files = await client.list(path);
    const f = files.find((f) => f.path === path);
    last = f && !f.deleted ? await client.read(path, { text: true }) : null;
    if (want(last)) {
      return last;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`${what}: the Node client last saw ${JSON.stringify(last)}`);
}

test("the example plugin's mirror: remote files reach the host byte for byte, host edits and deletes reach the remote, no echo loop", { timeout: 120000 }, async () => {
  const db = freshName("example");
  const remote = { url: `${relay.url}/${db}`, user: relay.user, password: relay.password };
  const other = await node.open({ settings: { encrypt: true, usePathObfuscation: true }, passphrase, remote: { ...remote, create: true } });
  const note = "# from the other device\n\nhéllo ✓\n";
  const binary = randomBytes(150 * 1024);
  await other.write("notes/a.md", note);
  await other.write("attachments/b.bin", binary);
  await other.push();

  const page = await newPage(browser, site.url("/"), { name: "example" });
  await page.evaluate(
    async ({ remote, passphrase, idb }) => {
      const ex = await import("/example/example.mjs");
      window.counter = { requests: 0 };
      window.host = new ex.MemoryFiles();
      // A note the host had before the plugin started.
      window.host.userWrite("before.md", "on this device first\n");
      window.vault = await window.livesync.open({
        passphrase,
        remote,
        storage: { kind: "indexeddb", name: idb },
        host: { fetch: ex.requestUrlFetch(ex.standInRequestUrl(window.counter)) },
      });
      window.mirrorErrors = [];
      window.mirror = new ex.Mirror(window.vault, window.host, {
        onError: (err, path) => window.mirrorErrors.push(`${path}: ${err.code ?? ""} ${err.message}`),
      });
      await window.mirror.start();
      window.live = await window.vault.live();
    },
    { remote, passphrase, idb: freshName("example-idb") },
  );

  // Remote → host, byte for byte.
  await page.waitForFunction(() => host.files.has("notes/a.md") && host.files.has("attachments/b.bin"), null, { timeout: 30000, polling: 50 });
  const got = await page.evaluate(async () => {
    const hex = async (d) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", d))].map((x) => x.toString(16).padStart(2, "0")).join("");
    return {
      a: await hex(host.files.get("notes/a.md").data),
      b: await hex(host.files.get("attachments/b.bin").data),
      bSize: host.files.get("attachments/b.bin").data.length,
    };
  });
  assert.equal(got.a, sha256(Buffer.from(note)));
  assert.equal(got.bSize, binary.length);
  assert.equal(got.b, sha256(binary));

  // Host → remote: the note the host had, and a new one.
  await pulled(other, "before.md", (t) => t === "on this device first\n", "the host's existing note never reached the remote");
  const fresh = `made on the host ${randomBytes(8).toString("hex")}\n`;
  await page.evaluate((text) => host.userWrite("from-host.md", text), fresh);
  await pulled(other, "from-host.md", (t) => t === fresh, "the host's new note never reached the remote");

  // A change from the remote reaches the host.
  const edited = `${fresh}edited on the other device\n`;
  await other.write("from-host.md", edited);
  await other.push();
  await page.waitForFunction((t) => new TextDecoder().decode(host.files.get("from-host.md")?.data ?? new Uint8Array()) === t, edited, { timeout: 30000, polling: 50 });

  // Deletes both ways.
  await page.evaluate(() => host.userDelete("notes/a.md"));
  await pulled(other, "notes/a.md", (t) => t === null, "the host's delete never reached the remote");
  await other.delete("attachments/b.bin");
  await other.push();
  await page.waitForFunction(() => !host.files.has("attachments/b.bin"), null, { timeout: 30000, polling: 50 });

  // No echo loop: once settled, nothing more is written on either side,
  // and the remote's sequence stands still while the live sync runs.
  const snapshot = async () => {
    await page.evaluate(() => mirror.idle());
    const info = await (await couchFetch(relay, `/${db}`)).json();
    const s = await page.evaluate(() => ({ log: host.log, counts: { ...mirror.counts }, errors: mirrorErrors, requests: counter.requests }));
    return { ...s, seq: info.update_seq };
  };
  const settled = await snapshot();
  await new Promise((r) => setTimeout(r, 2000));
  const later = await snapshot();
  assert.deepEqual(later.errors, []);
  assert.deepEqual(later.log, settled.log, "the host was written to while nothing changed");
  assert.deepEqual(later.counts, settled.counts, "the mirror kept writing while nothing changed");
  assert.equal(String(later.seq), String(settled.seq), "the remote kept changing while nothing changed");

  // Exactly one write per change on each side.
  const mirrorOps = later.log.filter((e) => e.by === "mirror").map((e) => `${e.op} ${e.path}`);
  assert.deepEqual(mirrorOps.sort(), ["delete attachments/b.bin", "write attachments/b.bin", "write from-host.md", "write notes/a.md"].sort());
  assert.deepEqual(later.counts, { hostWrites: 3, hostDeletes: 1, engineWrites: 2, engineDeletes: 1 });
  assert.ok(later.requests > 0, "no request went through the requestUrl adapter");
  // What the plugin's status bar shows: nothing held, nothing pending.
  const status = await page.evaluate(() => vault.status());
  assert.deepEqual(
    { held: status.held, pendingChunks: status.pendingChunks, files: status.files, deleted: status.deleted },
    { held: 0, pendingChunks: 0, files: 2, deleted: 2 },
  );

  // Stopping does not wait for the longpoll the adapter cannot abort.
  const stopMs = await page.evaluate(async () => {
    const t = performance.now();
    await live.stop();
    await mirror.stop();
    await vault.close();
    return performance.now() - t;
  });
  assert.ok(stopMs < 5000, `stopping took ${stopMs} ms`);
  await other.close();
  await page.close();
});
