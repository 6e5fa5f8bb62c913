// livesync-relay as a device of LiveSync's P2P mode
// ([[databases.livesync_p2p]], signalling on its own /_nostr), serving
// one end-to-end encrypted vault at the same time to a page in headless
// Chromium (the real trystero 0.25.3 and the test's LiveSync peer, see
// p2p.test.mjs) and to a CouchDB client (a real PouchDB 9 in Node).
//
// The plugin's E2EE vault dump is split by file: the page holds half the
// notes in the plugin's local (plaintext) form, the PouchDB client the
// other half in the remote (encrypted) form. The page syncs with the
// relay over WebRTC while the client pushes over HTTP; then each side
// catches up. Both end with the same documents and revisions as the
// relay; the page's copies of the client's notes are exactly the
// plugin's local documents (the relay decrypted them with the vault
// passphrase), and the client's copies of its own notes are unchanged.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { readFileSync } from "node:fs";
import { closeAll, couchFetch, repoRoot, startRelay } from "./harness.mjs";
import { allDocs } from "./vault.mjs";
import { launchP2PBrowser, openPeerPage, serveP2PPage, waitUntil } from "./p2p/support.mjs";

const roomId = "relay-e2ee-room";
const roomPassphrase = "relay room passphrase";
const db = "vault";
const dump = JSON.parse(readFileSync(path.join(repoRoot, "engine/testdata/vectors/vault-dump-e2ee.json"), "utf8"));
const vaultPassphrase = dump.fixedValues.passphrase;
const localDocs = dump.local.allDocs.map((r) => r.doc);
const remoteDocs = dump.remote.allDocs.map((r) => r.doc);

let site, browser, relay, PouchDB;

before(async () => {
  const require = createRequire(path.join(repoRoot, "tests/pouchdb/package.json"));
  PouchDB = require("pouchdb-node").plugin(require("pouchdb-adapter-memory"));
  [site, browser] = await Promise.all([serveP2PPage(), launchP2PBrowser()]);
});

after(async () => {
  await browser?.close();
  await closeAll();
});

// split gives the page every other note (in local form) with its chunks,
// the client the other notes (in remote form) with theirs and the
// remote's bookkeeping documents. A chunk two notes share goes to both.
function split() {
  const metas = localDocs.filter((d) => Array.isArray(d.children));
  const mine = metas.filter((_, i) => i % 2 === 0);
  const theirs = new Set(metas.filter((_, i) => i % 2 === 1).flatMap((m) => m.children));
  const pageIds = new Set([...mine.map((m) => m._id), ...mine.flatMap((m) => m.children)]);
  return {
    page: localDocs.filter((d) => pageIds.has(d._id)),
    client: remoteDocs.filter((d) => !pageIds.has(d._id) || theirs.has(d._id)),
  };
}

const vaultConfig = `[[databases]]\nname = "${db}"\npassphrase_env = "VAULT_PASS"\n`;
const roomConfig = `[[databases.livesync_p2p]]
group = "${roomId}"
room_passphrase_env = "ROOM_PASS"
auto_accept = "browser-peer"
loopback_only = true
stun = []
`;

async function relayStatus(server) {
  const s = await (await couchFetch(server, "/status")).json();
  return s.databases.find((d) => d.name === db)?.livesync_p2p?.[0];
}

const revs = (docs) =>
  docs
    .filter((d) => !d._id.startsWith("_"))
    .map((d) => `${d._id} ${d._rev}`)
    .sort();

test("the relay serves an E2EE vault to a browser P2P peer and a CouchDB client at once; all end with the same documents", { timeout: 240000 }, async (t) => {
  const env = { VAULT_PASS: vaultPassphrase, ROOM_PASS: roomPassphrase };
  // The vault's sync parameters (its salt) and milestone go in first, on a
  // relay without the room: the room's relay would otherwise create a
  // salt of its own for the empty vault.
  const first = await startRelay({ config: vaultConfig, env });
  for (const d of dump.remote.localDocs) {
    const { _rev, ...doc } = d;
    const r = await couchFetch(first, `/${db}/${d._id}`, { method: "PUT", body: JSON.stringify(doc) });
    assert.ok(r.ok, `PUT ${d._id}: ${r.status} ${await r.text()}`);
  }
  await first.stop();
  relay = await startRelay({ config: vaultConfig + roomConfig, env, dataDir: first.dataDir });
  const joined = await waitUntil("the relay to join its LiveSync P2P room", async () => {
    const s = await relayStatus(relay);
    return s?.state === "joined" && s;
  });
  const nostr = joined.relays[0];
  assert.match(nostr, /^ws:\/\/127\.0\.0\.1:\d+\/_nostr$/);

  const parts = split();
  const client = new PouchDB(`client-${Date.now()}`, { adapter: "memory" });
  const res = await client.bulkDocs(parts.client, { new_edits: false });
  assert.ok(!res.some((r) => r.error), JSON.stringify(res.filter((r) => r.error).slice(0, 3)));
  const remote = new PouchDB(`${relay.url}/${db}`, { adapter: "http", skip_setup: true, auth: { username: relay.user, password: relay.password } });

  const page = await openPeerPage(browser, site.url("/"), "relay-peer");
  t.after(() => page.closeAll());
  await page.evaluate((o) => window.lsp2p.start(o), {
    relay: nostr,
    roomId,
    passphrase: roomPassphrase,
    device: "browser-peer",
    vault: "vector-vault",
    vaultPassphrase,
    tweaks: dump.settings.effective,
    accept: ["relay"],
    follow: ["relay"],
    docs: parts.page,
  });
  // As long as trystero's offer lifetime (57 s) and more: see p2p.test.mjs.
  const relayId = await waitUntil("the page to meet the relay", () => page.evaluate(() => window.lsp2p.peerByName("relay")), 75000);

  // At the same time: the page syncs with the relay over WebRTC, the
  // client pushes over HTTP.
  const t0 = Date.now();
  const [synced, pushed] = await Promise.all([page.evaluate((p) => window.lsp2p.sync(p), relayId), client.replicate.to(remote, { batch_size: 50 })]);
  t.diagnostic(`the page's sync and the client's push, together: ${Date.now() - t0} ms`);
  assert.deepEqual(synced.answer, { ok: true });
  assert.equal(pushed.doc_write_failures, 0);

  // Then each catches up with what the other sent, until the page, the
  // client and the relay hold the same revisions.
  const want = await waitUntil(
    "the page, the client and the relay to converge",
    async () => {
      await page.evaluate((p) => window.lsp2p.pull(p), relayId);
      await client.replicate.from(remote, { batch_size: 50 });
      const [p, c, r] = [
        revs(await page.evaluate(() => window.lsp2p.docs())),
        revs((await client.allDocs({ include_docs: true })).rows.map((x) => x.doc)),
        revs(await allDocs(relay, db)),
      ];
      return p.length === r.length && c.length === r.length && p.join() === r.join() && c.join() === r.join() && r;
    },
    60000,
  );
  assert.equal(want.length, new Set([...localDocs, ...remoteDocs].map((d) => d._id)).size);

  // The page's documents are the plugin's local form, the client's own
  // are as it pushed them.
  const pageDocs = new Map((await page.evaluate(() => window.lsp2p.docs())).map((d) => [d._id, d]));
  for (const d of localDocs) {
    assert.deepEqual(pageDocs.get(d._id), d, `the page's ${d._id}`);
  }
  const clientDocs = new Map((await client.allDocs({ include_docs: true })).rows.map((x) => [x.id, x.doc]));
  for (const d of parts.client) {
    assert.deepEqual(clientDocs.get(d._id), d, `the client's ${d._id}`);
  }
  const s = await relayStatus(relay);
  assert.ok(s.pulls_served >= 1 && s.pulls_made >= 1, JSON.stringify(s));
  assert.deepEqual(
    s.peers.map((p) => [p.name, p.platform, p.accepted]),
    [["browser-peer", "browser", true]],
  );
  await client.destroy();
  await remote.close();
});
