// The wasm module as a LiveSync P2P peer in headless Chromium: a page
// opens a vault and joins a P2P room with vault.p2p() (Trystero over the
// page's own RTCPeerConnection and WebSocket), and replicates the vault
// both ways with a native Go peer (adapters/p2p/trysteronet with
// engine/livesyncrpc over an engine/vault replica, p2pwasmpeer), both
// signalling through an in-process Nostr relay (adapters/p2p/nostrrelay
// with ForwardEphemeral) on loopback.
//
// Proven here: the page's sync (pull, then legacy/reqSync) brings the Go
// peer's note into the page's vault and the page's note into the Go
// peer's; the Go peer's sync does the same from its side, the page
// serving its replica and pulling when asked; progress and peer events
// reach the page; with a wrong room passphrase the page and the Go peers
// each refuse the other's sealed offer ("incorrect room password") and
// never meet; an end-to-end encrypted vault syncs in local form with the
// same vault passphrase and is refused with another.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { createInterface } from "node:readline";
import { copyFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { chromiumArgs, closeAll, goBuild, newPage, repoRoot, serveStatic, tempDir } from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

const room = `wasm-${Date.now().toString(36)}`;
const roomPassphrase = "p2p passphrase for the wasm test";
let site, browser, goPeer;

// p2pModule returns a folder with the loader and livesync-p2p.wasm (the
// module built with -tags p2p) under the name the test page loads,
// livesync.wasm: from $LIVESYNC_TEST_WASM_DIR (wasm/build.sh writes
// both), else built here.
async function p2pModule() {
  const out = tempDir("livesync-browser-p2pwasm-");
  const ready = process.env.LIVESYNC_TEST_WASM_DIR && path.resolve(process.env.LIVESYNC_TEST_WASM_DIR);
  if (ready && existsSync(path.join(ready, "livesync-p2p.wasm"))) {
    await copyFile(path.join(ready, "livesync-p2p.wasm"), path.join(out, "livesync.wasm"));
    await copyFile(path.join(ready, "wasm_exec.js"), path.join(out, "wasm_exec.js"));
  } else {
    const run = promisify(execFile);
    await run("go", ["build", "-trimpath", "-ldflags=-s -w", "-tags", "p2p", "-o", path.join(out, "livesync.wasm"), "./wasm/"], {
      cwd: repoRoot,
      env: { ...process.env, GOOS: "js", GOARCH: "wasm" },
      maxBuffer: 16 << 20,
    });
    const goroot = (await run("go", ["env", "GOROOT"], { cwd: repoRoot })).stdout.trim();
    const execJS = [path.join(goroot, "lib/wasm/wasm_exec.js"), path.join(goroot, "misc/wasm/wasm_exec.js")].find((f) => existsSync(f));
    await copyFile(execJS, path.join(out, "wasm_exec.js"));
  }
  await copyFile(path.join(repoRoot, "wasm/js/index.mjs"), path.join(out, "index.mjs"));
  return out;
}

// startGoPeer runs p2pwasmpeer (with its own relay) and returns {relay,
// id, cmd(obj), stop()}; extra are more flags.
async function startGoPeer(name = "go-peer", extra = []) {
  const bin = await goBuild("./tests/browser/p2pwasmpeer");
  const child = spawn(bin, ["-room", room, "-room-passphrase", roomPassphrase, "-name", name, ...extra], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  const queued = [];
  lines.on("line", (l) => (waiting.length ? waiting.shift()(l) : queued.push(l)));
  const next = () => new Promise((resolve) => (queued.length ? resolve(queued.shift()) : waiting.push(resolve)));
  const exited = new Promise((_, reject) => child.on("exit", (code) => reject(new Error(`p2pwasmpeer exited (${code})`))));
  exited.catch(() => {});
  const ready = JSON.parse(await Promise.race([next(), exited]));
  let chain = Promise.resolve();
  const cmd = (obj) => {
    const run = chain.then(async () => {
      child.stdin.write(JSON.stringify(obj) + "\n");
      const out = JSON.parse(await Promise.race([next(), exited]));
      if (out.error) {
        throw new Error(`p2pwasmpeer ${obj.op}: ${out.error}`);
      }
      return out;
    });
    chain = run.catch(() => {});
    return run;
  };
  const stop = async () => {
    if (child.exitCode === null) {
      child.stdin.end();
      await exited.catch(() => {});
    }
  };
  return { ...ready, cmd, stop };
}

before(async () => {
  [site, goPeer, browser] = await Promise.all([
    p2pModule().then((dir) => serveStatic({ "/": path.join(here, "page"), "/wasm/": dir })),
    startGoPeer(),
    // Chromium gathers loopback host candidates under their addresses (no
    // mDNS names), so it meets the Go peer, which listens on 127.0.0.1.
    chromium.launch({
      executablePath: process.env.LIVESYNC_TEST_CHROMIUM || "/usr/bin/chromium",
      headless: true,
      args: [...chromiumArgs, "--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns"],
    }),
  ]);
});

after(async () => {
  await browser?.close();
  await goPeer?.stop();
  await closeAll();
});

// joinPage opens a vault in a fresh page and joins the room with it; the
// page keeps its peer and events in window.p2p and window.p2pEvents.
async function joinPage(name, passphrase, relays = [goPeer.relay], vault = { settings: {} }) {
  const ctx = await browser.newContext();
  const page = await newPage(ctx, site.url("/"), { name });
  await page.evaluate(
    async ({ name, room, passphrase, relays, vault }) => {
      await openVault("v", vault);
      window.p2pEvents = [];
      // The host's constructors, passed explicitly (counted, to show they are the ones used).
      window.made = { pc: 0, ws: 0 };
      const host = {
        RTCPeerConnection: class extends RTCPeerConnection {
          constructor(config) {
            super(config);
            window.made.pc++;
          }
        },
        WebSocket: class extends WebSocket {
          constructor(url) {
            super(url);
            window.made.ws++;
          }
        },
      };
      window.p2p = await vaults.v.p2p({ roomId: room, passphrase, relays, deviceName: name, autoAccept: "^go-peer$", stun: [], host });
      for (const topic of ["peer", "progress"]) {
        window.p2p.on(topic, (e) => window.p2pEvents.push({ topic, ...e, error: e.error ? { ...e.error } : undefined }));
      }
    },
    { name, room, passphrase, relays, vault },
  );
  return { page, ctx };
}

async function goRead(path) {
  return (await goPeer.cmd({ op: "read", path })).text;
}

test("a page's wasm P2P peer and a native Go peer replicate a vault both ways", { timeout: 120000 }, async () => {
  const { page, ctx } = await joinPage("page-peer", roomPassphrase);
  await page.evaluate(() => vaults.v.write("from-page.md", "written in the page\n"));
  await goPeer.cmd({ op: "write", path: "from-go.md", text: "written in Go\n" });

  // The page syncs: it pulls the Go peer's note, then asks the Go peer to
  // pull (legacy/reqSync), which it does from the page's replica.
  const res = await page.evaluate(() => window.p2p.sync("go-peer", { wait: 60000 }));
  assert.equal(res.peerId, goPeer.id);
  assert.ok(res.docs >= 2, `the page pulled ${res.docs} documents`);
  assert.equal(await page.evaluate(() => vaults.v.read("from-go.md", { text: true })), "written in Go\n");
  assert.equal(await goRead("from-page.md"), "written in the page\n");

  // The Go peer syncs from its side: the page serves its replica and
  // pulls when the Go peer asks it to.
  const pageId = await page.evaluate(() => window.p2p.id);
  const peers = (await goPeer.cmd({ op: "peers" })).peers;
  assert.ok(
    peers.some((p) => p.peerId === pageId && p.name === "page-peer"),
    `the Go peer knows ${JSON.stringify(peers)}`,
  );
  await page.evaluate(() => vaults.v.write("second-page.md", "the page again\n"));
  await goPeer.cmd({ op: "write", path: "second-go.md", text: "Go again\n" });
  await goPeer.cmd({ op: "sync", peer: pageId });
  assert.equal(await goRead("second-page.md"), "the page again\n");
  assert.equal(await page.evaluate(() => vaults.v.read("second-go.md", { text: true })), "Go again\n");
  assert.deepEqual(
    await page.evaluate(async () => (await vaults.v.list()).map((f) => f.path).sort()),
    ["from-go.md", "from-page.md", "second-go.md", "second-page.md"],
  );
  assert.deepEqual((await goPeer.cmd({ op: "list" })).paths.sort(), ["from-go.md", "from-page.md", "second-go.md", "second-page.md"]);

  const events = await page.evaluate(() => window.p2pEvents);
  assert.ok(events.some((e) => e.topic === "peer" && e.kind === "join" && e.peerId === goPeer.id), "no join event");
  assert.ok(events.some((e) => e.topic === "progress" && e.peerId === goPeer.id && !e.sending && e.done), "no progress of the page's pull");
  assert.ok(events.some((e) => e.topic === "progress" && e.peerId === goPeer.id && e.sending), "no acknowledged progress of the Go peer's pull");
  const made = await page.evaluate(() => window.made);
  assert.ok(made.pc >= 1 && made.ws >= 1, `the host's constructors made ${JSON.stringify(made)}`);
  const peersSeen = await page.evaluate(() => window.p2p.peers());
  assert.deepEqual(peersSeen, [{ peerId: goPeer.id, name: "go-peer", platform: "server" }]);

  await page.evaluate(async () => {
    await window.p2p.close();
    await vaults.v.close();
  });
  await ctx.close();
});

// waitUntil polls fn until it returns a truthy value, or fails after ms.
async function waitUntil(what, fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) {
      return v;
    }
    if (Date.now() > deadline) {
      assert.fail(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

// With different room passphrases the peers seal their signalling under
// different keys: the side that receives the leader's sealed offer (the
// peer whose id sorts first leads, as in trystero) cannot open it and
// reports "incorrect room password". The page meets two Go peers, one
// whose id sorts first (it offers, the page refuses) and one whose id
// sorts last (the page offers, it refuses).
test("a page with a wrong room passphrase is told, and tells, and never meets the Go peers", { timeout: 90000 }, async () => {
  const [low, high] = await Promise.all([startGoPeer("go-low", ["-id", "low"]), startGoPeer("go-high", ["-id", "high"])]);
  try {
    const { page, ctx } = await joinPage("wrong-peer", "not the passphrase", [low.relay, high.relay]);
    const pageId = await page.evaluate(() => window.p2p.id);
    assert.ok(low.id < pageId && pageId < high.id, `ids ${low.id} ${pageId} ${high.id}`);
    const err = await waitUntil(
      "the page to refuse the low peer's offer",
      () => page.evaluate((low) => window.p2pEvents.find((e) => e.topic === "peer" && e.kind === "error" && e.peerId === low)?.error, low.id),
      30000,
    );
    assert.equal(err.code, "wrong_room_passphrase");
    assert.match(err.message, /incorrect room password/);
    const told = await waitUntil(
      "the high peer to refuse the page's offer",
      async () => (await high.cmd({ op: "errors" })).errors.find((e) => e.peer === pageId),
      30000,
    );
    assert.match(told.error, /incorrect room password/);
    assert.equal(await page.evaluate(() => window.p2pEvents.some((e) => e.kind === "join")), false);
    assert.deepEqual(await page.evaluate(() => window.p2p.peers()), []);
    const failed = await page.evaluate(() => errorOf(window.p2p.sync("go-low", { wait: 500 })));
    assert.match(failed.message, /no peer "go-low"/);
    await page.evaluate(() => vaults.v.close());
    await ctx.close();
  } finally {
    await Promise.all([low.stop(), high.stop()]);
  }
});

// An end-to-end encrypted vault crosses in the plugin's local form (its
// chunk ids keyed by the passphrase): a page with the vault's passphrase
// syncs with the Go peer; one with another passphrase is refused before
// anything is replicated (the peers compare a hash of it).
test("an end-to-end encrypted vault syncs with the same passphrase and is refused with another", { timeout: 90000 }, async () => {
  const vaultPass = "vault passphrase of the e2ee test";
  const e2ee = await startGoPeer("go-peer", ["-passphrase", vaultPass]);
  try {
    await e2ee.cmd({ op: "write", path: "secret-go.md", text: "encrypted vault, from Go\n" });
    const { page, ctx } = await joinPage("e2ee-page", roomPassphrase, [e2ee.relay], { settings: { encrypt: true }, passphrase: vaultPass });
    await page.evaluate(() => vaults.v.write("secret-page.md", "encrypted vault, from the page\n"));
    const res = await page.evaluate(() => window.p2p.sync("go-peer", { wait: 60000 }));
    assert.ok(res.docs >= 2, `the page pulled ${res.docs} documents`);
    assert.equal(await page.evaluate(() => vaults.v.read("secret-go.md", { text: true })), "encrypted vault, from Go\n");
    assert.equal((await e2ee.cmd({ op: "read", path: "secret-page.md" })).text, "encrypted vault, from the page\n");
    await page.evaluate(() => vaults.v.close());
    await ctx.close();

    const other = await joinPage("wrong-vault", roomPassphrase, [e2ee.relay], { settings: { encrypt: true }, passphrase: "another passphrase" });
    const failed = await other.page.evaluate(() => errorOf(window.p2p.sync("go-peer", { wait: 60000 })));
    assert.match(failed?.message ?? "", /passphrase does not match/);
    assert.deepEqual(await other.page.evaluate(async () => (await vaults.v.list()).map((f) => f.path)), []);
    await other.page.evaluate(() => vaults.v.close());
    await other.ctx.close();
  } finally {
    await e2ee.stop();
  }
});
