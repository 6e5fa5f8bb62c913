// open's storage "indexeddb" through the loader under Node, with
// fake-indexeddb as the host's IndexedDB (installed by `npm ci` in
// wasm/internal/idb/testdata). Run wasm/build.sh first. The pull test
// needs the CouchDB-protocol test server (LIVESYNC_TEST_COUCHDB_URL); it
// is skipped without one, except under CI=true, where it fails.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadAPI, couchTarget } from "./servers.mjs";

const root = fileURLToPath(new URL("../../..", import.meta.url));
await import(join(root, "wasm/internal/idb/testdata/node_modules/fake-indexeddb/auto/index.mjs"));

const couch = couchTarget();
const passphrase = "correct horse battery staple";
const settings = { encrypt: true, usePathObfuscation: true };

let livesync;
before(async () => {
  livesync = await loadAPI();
});
after(async () => {
  await livesync?.exit();
});

function freshName(prefix) {
  return `${prefix}-${Date.now()}-${randomBytes(4).toString("hex")}`;
}

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.equal(err.code, code, `code of: ${err.message}`);
    return true;
  });
}

test("a replica in IndexedDB outlives its vault, one vault at a time, until deleteStorage", async () => {
  const storage = { kind: "indexeddb", name: freshName("storage") };
  const vault = await livesync.open({ settings, passphrase, storage });
  await vault.write("notes/a.md", "kept");
  await rejectsWith(livesync.open({ passphrase, storage }), "busy");
  await rejectsWith(livesync.deleteStorage(storage.name), "busy");
  await vault.close();

  const again = await livesync.open({ passphrase, storage }); // the vault's settings are in the replica
  assert.deepEqual((await again.list()).map((f) => f.path), ["notes/a.md"]);
  assert.equal(new TextDecoder().decode(await again.read("notes/a.md")), "kept");
  await again.close();

  await livesync.deleteStorage(storage.name);
  await rejectsWith(livesync.open({ passphrase, storage }), "no_vault");
  await livesync.deleteStorage(storage.name);
});

test("storage options: the default database name, and what is refused", async () => {
  const vault = await livesync.open({ settings, passphrase, storage: "indexeddb" });
  await rejectsWith(livesync.open({ settings, passphrase, storage: { kind: "indexeddb" } }), "busy");
  await vault.close();
  await livesync.deleteStorage(); // "livesync-go"
  for (const storage of ["opfs", { kind: "localStorage" }, { kind: "indexeddb", name: 7 }, 3]) {
    await rejectsWith(livesync.open({ settings, passphrase, storage }), "bad_options");
  }
  await rejectsWith(livesync.deleteStorage(7), "bad_options");
});

test("a reopened IndexedDB replica resumes its pull from the checkpoint", { skip: couch.skip }, async () => {
  await couch.start();
  const remote = { url: `${couch.url}/${freshName("wasm-idb")}`, user: couch.user, password: couch.password };
  const writer = await livesync.open({ settings, passphrase, remote: { ...remote, create: true } });
  for (let i = 0; i < 20; i++) {
    await writer.write(`notes/${i}.md`, `note ${i} `.repeat(50));
  }
  await writer.push();
  await writer.close();

  const storage = { kind: "indexeddb", name: freshName("pull") };
  let reader = await livesync.open({ passphrase, remote, storage });
  const first = await reader.pull();
  assert.ok(first.pull.written >= 20, `first pull wrote ${first.pull.written}`);
  await reader.close();

  reader = await livesync.open({ passphrase, remote, storage });
  const second = await reader.pull();
  assert.equal(second.pull.read, 0, "the second pull started from the checkpoint");
  assert.equal((await reader.list("notes/")).length, 20);
  assert.equal(new TextDecoder().decode(await reader.read("notes/7.md")), "note 7 ".repeat(50));
  await reader.close();
  await livesync.deleteStorage(storage.name);
});
