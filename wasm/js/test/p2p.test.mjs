// livesync-p2p.wasm under Node as a LiveSync P2P peer whose WebRTC and
// WebSocket are passed as host functions: @roamhq/wrtc's
// RTCPeerConnection and the ws package's WebSocket (from
// tests/trysteronode, whose npm ci installs them), since Node has no
// RTCPeerConnection of its own. The vault syncs both ways with a native
// Go peer (tests/browser/p2pwasmpeer: adapters/p2p/trysteronet with
// engine/livesyncrpc, and its in-process Nostr relay on loopback).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { root } from "./servers.mjs";

const dist = process.env.LIVESYNC_WASM_DIST ?? join(root, "wasm/dist");
const modules = join(root, "tests/trysteronode/node_modules");
const missing = [join(dist, "livesync-p2p.wasm"), join(modules, "@roamhq/wrtc"), join(modules, "ws")].filter((p) => !existsSync(p));
if (missing.length && process.env.CI === "true") {
  throw new Error(`missing ${missing.join(", ")} (bash wasm/build.sh; npm ci in tests/trysteronode), and CI=true`);
}
const skip = missing.length ? `missing ${missing.join(", ")} (bash wasm/build.sh; npm ci in tests/trysteronode)` : false;

let livesync, goPeer, tmp;

// startGoPeer runs p2pwasmpeer in room and returns {relay, id, cmd(obj), stop()}.
async function startGoPeer(room) {
  tmp = await mkdtemp(join(tmpdir(), "livesync-wasm-p2p-"));
  const bin = join(tmp, "p2pwasmpeer");
  await promisify(execFile)("go", ["build", "-o", bin, "./tests/browser/p2pwasmpeer"], { cwd: root });
  const child = spawn(bin, ["-room", room, "-room-passphrase", "node room", "-name", "go-peer"], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) {
      throw new Error("p2pwasmpeer exited");
    }
    return JSON.parse(value);
  };
  const ready = await next();
  let chain = Promise.resolve();
  const cmd = (obj) => {
    const run = chain.then(async () => {
      child.stdin.write(JSON.stringify(obj) + "\n");
      const out = await next();
      if (out.error) {
        throw new Error(`p2pwasmpeer ${obj.op}: ${out.error}`);
      }
      return out;
    });
    chain = run.catch(() => {});
    return run;
  };
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stop = async () => {
    child.stdin.end();
    await exited;
  };
  return { ...ready, cmd, stop };
}

before(async () => {
  if (skip) {
    return;
  }
  const room = `node-${Date.now().toString(36)}`;
  goPeer = await startGoPeer(room);
  goPeer.room = room;
  const { load } = await import(join(dist, "index.mjs"));
  const { readFile } = await import("node:fs/promises");
  livesync = await load({ wasm: await readFile(join(dist, "livesync-p2p.wasm")) });
});

after(async () => {
  await livesync?.exit();
  await goPeer?.stop();
  if (tmp) {
    await rm(tmp, { recursive: true, force: true });
  }
});

test("under Node, with the host's WebRTC and WebSocket passed in, a vault syncs both ways with a Go peer", { skip, timeout: 90000 }, async () => {
  const require = createRequire(join(modules, "x.js"));
  const wrtc = require("@roamhq/wrtc");
  const WebSocket = require("ws");
  const vault = await livesync.open({ settings: {} });
  await vault.write("from-node.md", "written under Node\n");
  await goPeer.cmd({ op: "write", path: "from-go.md", text: "written in Go\n" });
  const peer = await vault.p2p({
    roomId: goPeer.room,
    passphrase: "node room",
    relays: [goPeer.relay],
    deviceName: "node-peer",
    autoAccept: "^go-peer$",
    stun: [],
    host: { RTCPeerConnection: wrtc.RTCPeerConnection, WebSocket },
  });
  const joined = [];
  peer.on("peer", (e) => joined.push(e));
  const res = await peer.sync("go-peer", { wait: 60000 });
  assert.equal(res.peerId, goPeer.id);
  assert.equal(await vault.read("from-go.md", { text: true }), "written in Go\n");
  assert.equal((await goPeer.cmd({ op: "read", path: "from-node.md" })).text, "written under Node\n");
  assert.ok(joined.some((e) => e.kind === "join" && e.peerId === goPeer.id));
  await peer.close();
  await vault.close();
});
