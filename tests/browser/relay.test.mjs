// The wasm module in headless Chromium, on a page of a local origin,
// against livesync-relay over CORS: live sync both ways with a Node-side
// client, a note written in the page seen by the relay and by a real
// PouchDB 9 client, a note read on demand after a metadata-only pull, and
// a note pushed metadata-first kept out of sight until its chunks arrive:
// by the relay's hold-back, and (against the express-pouchdb test server,
// which has none) by the vault's own.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { closeAll, corsProxy, couchFetch, env, freshName, launchBrowser, newPage, servePage, skipUnless, startRelay } from "./harness.mjs";
import { allDocs, events, isChunk, nodeLivesync, pouchPull, putDocs, waitEvent } from "./vault.mjs";

const passphrase = "correct horse battery staple";
let site, relay, browser, node;

before(async () => {
  site = await servePage();
  // Only the page's origin: the test fails if the relay's CORS does not
  // answer it.
  relay = await startRelay({ corsOrigins: [site.origin] });
  browser = await launchBrowser();
  node = await nodeLivesync();
});

after(async () => {
  await node?.exit();
  await closeAll();
});

const creds = (server) => ({ user: server.user, password: server.password });
const remoteOf = (server, db, extra = {}) => ({ url: `${server.url}/${db}`, ...creds(server), ...extra });

test("live sync from a page: a Node client's notes arrive, the page's note reaches the relay and PouchDB 9", { timeout: 60000 }, async () => {
  const db = freshName("live");
  const writer = await node.open({ settings: {}, remote: remoteOf(relay, db, { create: true }) });
  await writer.write("from-node.md", "written in node\n");
  await writer.push();

  const page = await newPage(browser, site.url("/"), { name: "live" });
  await page.evaluate(async (remote) => {
    await openVault("v", { settings: {}, remote });
    window.live = await vaults.v.live();
  }, remoteOf(relay, db));
  await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "from-node.md");
  assert.equal(await page.evaluate(() => vaults.v.read("from-node.md", { text: true })), "written in node\n");

  // The page's write goes out through the live sync.
  const text = `written in the browser ${randomBytes(8).toString("hex")}\n`;
  await page.evaluate((text) => vaults.v.write("from-page.md", text), text);
  let seen;
  for (let i = 0; i < 100 && seen === undefined; i++) {
    await writer.pull();
    seen = await writer.read("from-page.md", { text: true }).catch((err) => (err.code === "not_found" ? undefined : Promise.reject(err)));
    if (seen === undefined) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  assert.equal(seen, text, "the Node client never pulled the page's note from the relay");

  // A real PouchDB 9 client sees the note the page wrote: its metadata
  // document and the chunks it names, whose data is the note.
  const docs = await pouchPull(relay, db);
  const meta = docs.find((d) => d.path === "from-page.md" && !d._deleted);
  assert.ok(meta, `PouchDB has no metadata for from-page.md: ${docs.map((d) => d._id).join(", ")}`);
  const byId = new Map(docs.filter(isChunk).map((d) => [d._id, d]));
  const body = meta.children.map((id) => byId.get(id)?.data ?? assert.fail(`chunk ${id} is not in PouchDB`)).join("");
  assert.equal(body, text);

  // The live sync keeps going: another note from Node arrives.
  await writer.write("second.md", "two\n");
  await writer.push();
  await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "second.md");
  assert.equal(await page.evaluate(() => vaults.v.read("second.md", { text: true })), "two\n");
  const stopMs = await page.evaluate(async () => {
    const t = performance.now();
    await window.live.stop();
    await vaults.v.close();
    return performance.now() - t;
  });
  assert.ok(stopMs < 5000, `stopping the live sync took ${stopMs} ms`);
  await writer.close();
  await page.close();
});

test("a metadata-only pull in the page, then a read fetches the note's chunks on demand (E2EE)", { timeout: 60000 }, async () => {
  const db = freshName("ondemand");
  const body = randomBytes(300 * 1024);
  const writer = await node.open({ settings: { encrypt: true, usePathObfuscation: true }, passphrase, remote: remoteOf(relay, db, { create: true }) });
  await writer.write("big.bin", body);
  await writer.write("small.md", "small\n");
  await writer.push();
  await writer.close();

  const page = await newPage(browser, site.url("/"), { name: "ondemand" });
  const r = await page.evaluate(
    async ({ remote, passphrase }) => {
      await openVault("v", { passphrase, remote });
      const pulled = await vaults.v.pull({ metadataOnly: true });
      const held = await vaults.v.held();
      const before = requests.length;
      const data = await vaults.v.read("big.bin");
      const during = requests.slice(before);
      const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
      const digest = hex(await crypto.subtle.digest("SHA-256", data));
      const heldAfter = await vaults.v.held();
      const list = await vaults.v.list("");
      await vaults.v.close();
      return { pulled, held, during, size: data.byteLength, digest, heldAfter, list };
    },
    { remote: remoteOf(relay, db), passphrase },
  );
  const held = Object.fromEntries(r.held.map((f) => [f.path, f]));
  assert.ok(held["big.bin"]?.missing > 0, `big.bin is not held after the metadata-only pull: ${JSON.stringify(r.held)}`);
  assert.ok(r.during.length > 0, "the read made no request: the chunks were not fetched on demand");
  assert.ok(r.during.every((q) => q.url.startsWith(relay.url)), JSON.stringify(r.during));
  assert.equal(r.size, body.length);
  assert.equal(r.digest, createHash("sha256").update(body).digest("hex"));
  assert.ok(!r.heldAfter.some((f) => f.path === "big.bin"), `big.bin still held after its read: ${JSON.stringify(r.heldAfter)}`);
  assert.deepEqual(r.list.map((f) => f.path).sort(), ["big.bin", "small.md"]);
  await page.close();
});

// metadataFirst writes a note with a Node client into a staging database
// of server and returns its documents split into the metadata and the
// chunks, to be stored in another database of the same (unencrypted)
// vault settings in the order a test chooses.
async function metadataFirst(server, path, text) {
  const staging = freshName("staging");
  const w = await node.open({ settings: {}, remote: remoteOf(server, staging, { create: true }) });
  await w.write(path, text);
  await w.push();
  await w.close();
  const docs = await allDocs(server, staging);
  const meta = docs.filter((d) => d.path === path);
  const chunks = docs.filter((d) => isChunk(d) && meta.some((m) => m.children.includes(d._id)));
  assert.equal(meta.length, 1, JSON.stringify(docs.map((d) => d._id)));
  assert.ok(chunks.length > 0, "the note has no chunks");
  return { meta, chunks };
}

test("the relay keeps a note pushed metadata-first out of the page's live sync until its chunks arrive", { timeout: 60000 }, async () => {
  const db = freshName("relayheld");
  const writer = await node.open({ settings: {}, remote: remoteOf(relay, db, { create: true }) });
  await writer.write("first.md", "one\n");
  await writer.push();
  const text = `held ${randomBytes(16).toString("hex")}\n`;
  const parts = await metadataFirst(relay, "held.md", text);

  const page = await newPage(browser, site.url("/"), { name: "relayheld" });
  await page.evaluate(async (remote) => {
    await openVault("v", { settings: {}, remote });
    window.live = await vaults.v.live();
  }, remoteOf(relay, db));
  await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "first.md");

  await putDocs(relay, db, parts.meta);
  // A note written after the metadata arrives: the feed is in order, so
  // the page would have seen the held note by now if it were served.
  await writer.write("after.md", "after\n");
  await writer.push();
  await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "after.md");
  const seen = (await events(page, "v")).filter((e) => e.path === "held.md");
  assert.deepEqual(seen, [], "the page saw the note before its chunks arrived");
  assert.ok(!(await page.evaluate(() => vaults.v.list(""))).some((f) => f.path === "held.md"));
  const status = await (await couchFetch(relay, "/status")).json();
  const dbStatus = status.databases.find((d) => d.name === db);
  assert.equal(dbStatus?.held_documents, 1, `the relay does not hold the metadata: ${JSON.stringify(dbStatus)}`);

  await putDocs(relay, db, parts.chunks);
  await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "held.md");
  assert.equal(await page.evaluate(() => vaults.v.read("held.md", { text: true })), text);
  await page.evaluate(async () => {
    await window.live.stop();
    await vaults.v.close();
  });
  await writer.close();
  await page.close();
});

test("the page's vault holds a note whose metadata arrived before its chunks, and releases it when they come", { timeout: 60000, skip: skipUnless("LIVESYNC_TEST_COUCHDB_URL") }, async () => {
  // express-pouchdb serves metadata at once: the vault must hold it itself.
  const proxy = await corsProxy(env.couch.url);
  try {
    const server = { ...env.couch, url: proxy.url };
    const db = freshName("vaultheld");
    const writer = await node.open({ settings: {}, remote: remoteOf(env.couch, db, { create: true }) });
    await writer.write("first.md", "one\n");
    await writer.push();
    await writer.close();
    const text = `held ${randomBytes(16).toString("hex")}\n`;
    const parts = await metadataFirst(env.couch, "held.md", text);

    const page = await newPage(browser, site.url("/"), { name: "vaultheld" });
    await page.evaluate(async (remote) => {
      await openVault("v", { settings: {}, remote });
      window.live = await vaults.v.live();
    }, remoteOf(server, db));
    await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "first.md");

    await putDocs(env.couch, db, parts.meta);
    const heldEvent = await waitEvent(page, "v", (e) => e.kind === "held" && e.path === "held.md");
    assert.ok(heldEvent.missing > 0, JSON.stringify(heldEvent));
    const before = await page.evaluate(async () => ({
      held: await vaults.v.held(),
      read: await errorOf(vaults.v.read("held.md", { text: true })),
    }));
    assert.deepEqual(before.held.map((f) => f.path), ["held.md"]);
    assert.ok(before.read, "a held note was readable before its chunks arrived");

    await putDocs(env.couch, db, parts.chunks);
    await waitEvent(page, "v", (e) => e.kind === "released" && e.path === "held.md");
    const afterward = await page.evaluate(async () => ({
      held: await vaults.v.held(),
      text: await vaults.v.read("held.md", { text: true }),
    }));
    assert.deepEqual(afterward.held, []);
    assert.equal(afterward.text, text);
    await page.evaluate(async () => {
      await window.live.stop();
      await vaults.v.close();
    });
    await page.close();
  } finally {
    await proxy.stop();
  }
});
