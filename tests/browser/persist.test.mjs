// The wasm module's IndexedDB replica in headless Chromium over a profile
// folder of its own, against livesync-relay over CORS: a browser started
// again over the same profile reopens the vault from IndexedDB (every
// note listed and readable before any request, and the next pull reads
// nothing already read), and a pull cut by closing its page mid-way
// resumes from its checkpoint in a new browser (fewer documents read than
// a full pull, and every note right at the end).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { closeAll, freshName, launchPersistent, newPage, servePage, startRelay, tempDir } from "./harness.mjs";
import { nodeLivesync, waitEvent } from "./vault.mjs";

const passphrase = "correct horse battery staple";
let site, relay, node;

before(async () => {
  site = await servePage();
  relay = await startRelay({ corsOrigins: [site.origin] });
  node = await nodeLivesync();
});

after(async () => {
  await node?.exit();
  await closeAll();
});

const remoteOf = (db, extra = {}) => ({ url: `${relay.url}/${db}`, user: relay.user, password: relay.password, ...extra });
const noteText = (i) => `# note ${i}\n${"line of text ".repeat(1 + (i % 7))}${i}\n`;
const notePath = (i) => `notes/${String(Math.floor(i / 100)).padStart(2, "0")}/n${i}.md`;

// fill writes count notes with a Node client into a new E2EE vault db and
// returns the documents a full pull of it reads (a fresh memory replica's
// count).
async function fill(db, count) {
  const w = await node.open({ settings: { encrypt: true, usePathObfuscation: true }, passphrase, remote: remoteOf(db, { create: true }) });
  for (let i = 0; i < count; i++) {
    await w.write(notePath(i), noteText(i));
  }
  await w.push();
  await w.close();
  const ref = await node.open({ passphrase, remote: remoteOf(db) });
  const { pull } = await ref.pull();
  await ref.close();
  return pull.read;
}

// checkAll asserts that the page's vault v lists exactly count notes and
// that each reads back as written; returns how many requests the reads made.
async function checkAll(page, count) {
  const r = await page.evaluate(async () => {
    const before = requests.length;
    const files = await vaults.v.list("");
    const texts = {};
    for (const f of files) {
      texts[f.path] = await vaults.v.read(f.path, { text: true });
    }
    return { texts, held: await vaults.v.held(), requests: requests.length - before };
  });
  assert.equal(Object.keys(r.texts).length, count, "notes listed");
  for (let i = 0; i < count; i++) {
    assert.equal(r.texts[notePath(i)], noteText(i), notePath(i));
  }
  assert.deepEqual(r.held, []);
  return r.requests;
}

const storageOf = (name) => ({ kind: "indexeddb", name });

test("a browser started again reopens the vault from IndexedDB: nothing is pulled twice", { timeout: 60000 }, async () => {
  const db = freshName("reopen");
  const count = 150;
  const full = await fill(db, count);
  const profile = tempDir("livesync-browser-profile-");
  const storage = storageOf(freshName("idb"));

  let ctx = await launchPersistent(profile);
  let page = await newPage(ctx, site.url("/"), { name: "reopen-1" });
  const first = await page.evaluate(
    async ({ remote, passphrase, storage }) => {
      await openVault("v", { passphrase, remote, storage });
      return (await vaults.v.pull()).pull;
    },
    { remote: remoteOf(db), passphrase, storage },
  );
  assert.equal(first.read, full, "the first pull read the whole vault");
  await checkAll(page, count);
  await page.evaluate(() => vaults.v.close());
  await ctx.close(); // the browser exits; the profile stays

  ctx = await launchPersistent(profile);
  page = await newPage(ctx, site.url("/"), { name: "reopen-2" });
  await page.evaluate(
    async ({ remote, passphrase, storage }) => {
      await openVault("v", { passphrase, remote, storage });
    },
    { remote: remoteOf(db), passphrase, storage },
  );
  // Every note is there before any pull, read without a request.
  assert.equal(await checkAll(page, count), 0, "reading the reopened notes made requests");
  const second = await page.evaluate(async () => (await vaults.v.pull()).pull);
  assert.equal(second.read, 0, `the pull after reopening read ${second.read} documents again (a full pull reads ${full})`);

  // And it goes on from there: one new note is one note's documents.
  const w = await node.open({ passphrase, remote: remoteOf(db) });
  await w.pull();
  await w.write("late.md", "late\n");
  await w.push();
  await w.close();
  const third = await page.evaluate(async () => ({ pull: (await vaults.v.pull()).pull, text: await vaults.v.read("late.md", { text: true }) }));
  assert.equal(third.text, "late\n");
  assert.ok(third.pull.read > 0 && third.pull.read <= 3, `pulling one new note read ${third.pull.read} documents`);
  await page.evaluate(() => vaults.v.close());
  await ctx.close();
});

test("a pull cut by closing its page resumes from its checkpoint in a new browser", { timeout: 90000 }, async () => {
  const db = freshName("resume");
  const count = 600;
  const full = await fill(db, count);
  const profile = tempDir("livesync-browser-profile-");
  const storage = storageOf(freshName("idb"));

  let ctx = await launchPersistent(profile);
  let page = await newPage(ctx, site.url("/"), { name: "resume-1" });
  await page.evaluate(
    async ({ remote, passphrase, storage }) => {
      await openVault("v", { passphrase, remote, storage });
      // The network goes quiet at the fourth _bulk_get, so that the page
      // is closed mid-pull however fast the machine and however many
      // pages the pull fetches ahead: at most three pages are stored.
      window.stallAfter = { match: "/_bulk_get", count: 3, seen: 0 };
      window.pulling = vaults.v.pull().then(
        (r) => (window.pulled = r),
        (err) => (window.pullError = String(err)),
      );
    },
    { remote: remoteOf(db), passphrase, storage },
  );
  const cut = await waitEvent(page, "v", (e) => e.kind === "sync-progress" && e.read > 0, null, { timeout: 60000 });
  await page.waitForFunction(() => window.stalled, null, { timeout: 60000 });
  assert.equal(await page.evaluate(() => window.pulled ?? window.pullError ?? null), null, "the pull ended before the page was closed");
  await page.close(); // mid-pull: the renderer goes away with the pull
  await ctx.close();

  ctx = await launchPersistent(profile);
  page = await newPage(ctx, site.url("/"), { name: "resume-2" });
  const second = await page.evaluate(
    async ({ remote, passphrase, storage }) => {
      await openVault("v", { passphrase, remote, storage });
      return (await vaults.v.pull()).pull;
    },
    { remote: remoteOf(db), passphrase, storage },
  );
  process.stderr.write(`# resume: full pull ${full} documents, cut after ${cut.read}, resumed pull read ${second.read}\n`);
  assert.ok(second.read > 0, "the resumed pull read nothing: the first one was not cut");
  assert.ok(second.read < full, `the resumed pull read ${second.read} documents, a full pull reads ${full}: it started over`);
  await checkAll(page, count);
  await page.evaluate(() => vaults.v.close());
  await ctx.close();
});
