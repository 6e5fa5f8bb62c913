// Node-side helpers of the Chromium P2P interop tests (p2p.test.mjs and
// p2p-relay.test.mjs):
//
//   bundlePage()          → folder with index.html and bundle.js: main.mjs
//                           bundled with esbuild (trystero, PouchDB, the peer)
//   serveP2PPage()        → serveStatic of that folder
//   startGoPeers({relay}) → the Go test peers (p2ppeer, built with go build):
//                           {relay, control, open(opts), state(id), docs(id),
//                           put(id, docs), pull(id, peer), sync(id, peer),
//                           call(id, peer, method, args, timeoutMs),
//                           broadcast(id), close(id), stop()}
//   launchP2PBrowser()    → a headless Chromium whose WebRTC gathers loopback
//                           host candidates under their addresses (no mDNS
//                           names), so it meets peers on 127.0.0.1
//   openPeerPage(browser, url, name) → a Page of its own context (its own
//                           IndexedDB and trystero selfId), console forwarded
//   vaultDump(name)       → {docs, tweaks, passphrase} of a plugin vault dump
//                           (engine/testdata/vectors), docs in local form
//   waitUntil(what, fn, ms) polls fn until it returns a truthy value
//   roomPassword(p)       LiveSync's room password, octagonal-wheels' mixedHash
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync, copyFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { build } from "esbuild";
import { mixedHash } from "octagonal-wheels/hash/purejs";
import { chromiumArgs, goBuild, repoRoot, serveStatic, tempDir } from "../harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

export function roomPassword(passphrase) {
  const [m, f] = mixedHash(passphrase, 0);
  return m.toString(36) + f.toString(36);
}

let bundled;
export function bundlePage() {
  bundled ??= (async () => {
    const out = tempDir("livesync-p2p-page-");
    await build({
      entryPoints: [path.join(here, "main.mjs")],
      bundle: true,
      format: "esm",
      platform: "browser",
      target: "es2022",
      outfile: path.join(out, "bundle.js"),
      define: { global: "globalThis" },
      logLevel: "warning",
    });
    copyFileSync(path.join(here, "index.html"), path.join(out, "index.html"));
    return out;
  })();
  return bundled;
}

export async function serveP2PPage() {
  return serveStatic({ "/": await bundlePage() });
}

const opened = new Set();
process.on("exit", () => {
  for (const c of opened) {
    c.kill("SIGKILL");
  }
});

/** Starts the Go test peers' program; see the API above. */
export async function startGoPeers({ relay = "", verbose = !!process.env.LIVESYNC_TEST_BROWSER_VERBOSE } = {}) {
  const bin = await goBuild("./tests/browser/p2ppeer");
  const args = [...(relay ? ["-relay", relay] : []), ...(verbose ? ["-v"] : [])];
  const child = spawn(bin, args, { cwd: repoRoot, stdio: ["pipe", "pipe", "inherit"] });
  opened.add(child);
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const first = await new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.once("line", (l) => resolve(JSON.parse(l)));
    child.once("exit", (code) => reject(new Error(`p2ppeer exited (${code}) before it was ready`)));
  });
  const post = async (p, body) => {
    const r = await fetch(first.control + p, { method: "POST", body: JSON.stringify(body) });
    const v = await r.json();
    if (!r.ok) {
      throw new Error(`p2ppeer ${p}: ${v.error}`);
    }
    return v;
  };
  return {
    relay: first.relay,
    control: first.control,
    open: (opts) => post("/open", opts),
    state: (id) => post("/state", { id }),
    docs: async (id) => (await post("/docs", { id })).docs,
    put: (id, docs) => post("/put", { id, docs }),
    pull: (id, peer, timeoutMs = 60000) => post("/pull", { id, peer, timeoutMs }),
    sync: (id, peer, timeoutMs = 60000) => post("/sync", { id, peer, timeoutMs }),
    call: (id, peer, method, args, timeoutMs) => post("/call", { id, peer, method, args, timeoutMs }),
    broadcast: (id) => post("/broadcast", { id }),
    close: (id) => post("/close", { id }),
    async stop() {
      if (child.exitCode === null) {
        child.stdin.end();
        const t = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(t);
      }
      opened.delete(child);
    },
  };
}

/** Chromium for P2P on loopback: loopback candidates allowed, host addresses not hidden behind mDNS names. */
export function launchP2PBrowser() {
  return chromium.launch({
    executablePath: process.env.LIVESYNC_TEST_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [...chromiumArgs, "--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns"],
  });
}

/** Opens url in a fresh context of browser (its own storage and trystero selfId) and waits for window.lsp2p. */
export async function openPeerPage(browser, url, name) {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const verbose = !!process.env.LIVESYNC_TEST_BROWSER_VERBOSE;
  page.on("console", (msg) => {
    if (verbose || msg.type() === "error") {
      process.stderr.write(`[${name}] ${msg.type()}: ${msg.text()}\n`);
    }
  });
  page.on("pageerror", (err) => process.stderr.write(`[${name}] page error: ${err.stack || err.message}\n`));
  await page.goto(url);
  await page.waitForFunction(() => window.lsp2pReady, null, { timeout: 30000 });
  page.closeAll = () => ctx.close();
  return page;
}

/** The plugin's vault dump name (vault-dump-plain.json, vault-dump-e2ee.json): its local documents, must-match tweaks and passphrase. */
export function vaultDump(name) {
  const d = JSON.parse(readFileSync(path.join(repoRoot, "engine/testdata/vectors", name), "utf8"));
  const docs = d.local.allDocs.map((r) => r.doc);
  return { docs, tweaks: d.settings.effective, passphrase: d.fixedValues.passphrase ?? "" };
}

/** Polls fn (sync or async) every 50 ms until it returns a truthy value, which it resolves with. */
export async function waitUntil(what, fn, ms = 30000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) {
        return v;
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last.message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
