// The wasm module through its loader under Node (memory replica, HTTP
// through Node's fetch passed as host.fetch) against both servers a
// LiveSync vault lives on here: the CouchDB-protocol test server
// (LIVESYNC_TEST_COUCHDB_URL, _USER, _PASSWORD) and the livesync-relay
// binary, built and started by the test. Against each: a Setup URI, the
// plugin's own E2EE vault read byte for byte, a write and a delete seen
// by a PouchDB 9 client configured as LiveSync, the refusals (wrong
// passphrase, unreachable server, remote locked by another device) by
// their error codes, hunt(), doctor() and status(). Run wasm/build.sh
// first. Without the test server the tests skip, except under CI=true,
// where they fail.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ci, couch, couchTarget, freshName, loadAPI, loadDump, lockAsPlugin, pouchDevice, pouchInstalled,
  readDump, relayTarget, root,
} from "./servers.mjs";
import { rejectsWith } from "./rejects.mjs";

const couchT = couchTarget();
// The relay needs no server of its own; it follows the same rule, so a
// run without the test server (and without CI) skips everything.
const relayT = relayTarget();
relayT.skip = couchT.skip;

let livesync;
let plugin; // the plugin's E2EE vault: {dump, files, passphrase}
before(async () => {
  if (couchT.skip) {
    return;
  }
  livesync = await loadAPI();
  plugin = await readDump();
});
after(async () => {
  await livesync?.exit();
});

let fetches = 0;
const host = {
  fetch: (...args) => {
    fetches++;
    return fetch(...args);
  },
};

// Setup URIs the plugin's own library (octagonal-wheels) made.
const vectors = JSON.parse(await readFile(join(root, "engine/setupuri/testdata/upstream.json"), "utf8"));

// waitFor resolves with the first event of v on topic that pred accepts.
function waitFor(v, topic, pred) {
  return new Promise((resolve) => {
    const off = v.on(topic, (e) => {
      if (pred(e)) {
        off();
        resolve(e);
      }
    });
  });
}

// The two servers' suites run side by side (each test inside one runs
// alone); it keeps the file's time near the slower server's.
describe("servers", { concurrency: true }, () => {
  for (const t of [couchT, relayT]) {
    describe(t.name, { skip: t.skip }, () => {
      before(() => t.start());
      after(() => t.stop());
      const remote = (db, extra = {}) => ({ url: `${t.url}/${db}`, user: t.user, password: t.password, ...extra });

      test("a Setup URI opens the vault it describes", async () => {
        const v = vectors.vectors.find((x) => x.name === "couchdb");
        const db = freshName();
        const a = await livesync.open({ setupURI: v.uri, setupPassphrase: vectors.setupPassphrase, remote: remote(db, { create: true }), host });
        await a.write("from-uri.md", "hello\n");
        await a.push();
        await a.close();
        const b = await livesync.open({ setupURI: v.uri, setupPassphrase: vectors.setupPassphrase, remote: remote(db), host });
        await b.pull();
        assert.equal(await b.read("from-uri.md", { text: true }), "hello\n");
        await b.close();
      });

      test("the plugin's E2EE vault is pulled and every file reads byte for byte; doctor finds it healthy", async () => {
        const db = await loadDump(t, plugin.dump);
        const v = await livesync.open({ passphrase: plugin.passphrase, remote: remote(db), device: "wasm-test", host });
        const before = fetches;
        const res = await v.pull();
        assert.ok(res.pull.written > 0 && fetches > before, JSON.stringify(res));
        const paths = (await v.list("")).map((f) => f.path).sort();
        assert.deepEqual(paths, [...plugin.files.keys()].sort());
        for (const [path, want] of plugin.files) {
          const got = await v.read(path);
          assert.ok(Buffer.from(got).equals(want), `${path}: ${got.length} bytes, want ${want.length}`);
        }
        const st = await v.status();
        assert.equal(st.files, plugin.files.size);
        assert.equal(st.held, 0);
        assert.equal(st.pendingChunks, 0);
        assert.deepEqual(st.heldPaths, []);
        assert.ok(st.chunks > 0, JSON.stringify(st));

        const findings = await v.doctor();
        const checks = findings.map((f) => f.check);
        for (const c of ["server", "database", "salt", "milestone", "passphrase"]) {
          assert.ok(checks.includes(c), `no ${c} check: ${checks}`);
        }
        const problems = findings.filter((f) => f.status === "problem");
        assert.deepEqual(problems, []);
        for (const f of findings) {
          assert.ok(["ok", "warning", "skipped"].includes(f.status) && typeof f.message === "string", JSON.stringify(f));
        }
        await v.close();
      });

      test("a write and a delete reach a PouchDB 9 client configured as LiveSync", { skip: !pouchInstalled && !ci && "tests/pouchdb has no node_modules" }, async () => {
        const db = freshName();
        const v = await livesync.open({ settings: { encrypt: false }, remote: remote(db, { create: true }), host });
        const text = "# From the wasm module\nseen by PouchDB\n";
        const w = await v.write("Pouch/Note.md", text);
        await v.push();
        const pouch = pouchDevice(t, db);
        try {
          await pouch.call({ op: "sync" });
          let docs = (await pouch.call({ op: "docs" })).docs;
          const meta = docs.find((d) => d.path === "Pouch/Note.md");
          assert.ok(meta, `no metadata among ${docs.map((d) => d._id)}`);
          assert.equal(meta._rev, w.rev);
          assert.ok(!meta.deleted);
          // Chunks are not replicated: LiveSync fetches them by id.
          await pouch.call({ op: "fetch", ids: meta.children });
          docs = (await pouch.call({ op: "docs" })).docs;
          const chunks = new Map(docs.filter((d) => d.type === "leaf").map((d) => [d._id, d.data]));
          assert.equal(meta.children.map((id) => chunks.get(id)).join(""), text);

          const d = await v.delete("Pouch/Note.md");
          await v.push();
          await pouch.call({ op: "sync" });
          docs = (await pouch.call({ op: "docs" })).docs;
          const gone = docs.find((x) => x._id === meta._id);
          assert.equal(gone?._rev, d.rev);
          assert.equal(gone.deleted, true);
        } finally {
          await pouch.close();
          await v.close();
        }
      });

      test("a wrong passphrase, an unreachable server and a remote locked by another device are refused by code", async () => {
        const db = await loadDump(t, plugin.dump);
        await rejectsWith(livesync.open({ passphrase: "not the passphrase", remote: remote(db), host }), "wrong_passphrase");
        await rejectsWith(
          livesync.open({ passphrase: plugin.passphrase, remote: { url: "http://127.0.0.1:9/vault" }, host }),
          "unreachable",
        );

        const v = await livesync.open({ passphrase: plugin.passphrase, remote: remote(db), host });
        await v.pull();
        await v.write("mine.md", "written here\n");
        // The plugin's device rebuilds the remote: it is locked, and only
        // that device is accepted.
        await lockAsPlugin(t, db);
        await rejectsWith(v.sync(), "locked");
        const findings = await v.doctor();
        const m = findings.find((f) => f.check === "milestone");
        assert.equal(m?.status, "problem", JSON.stringify(findings));
        assert.equal(m.code, "locked");
        assert.ok(m.actions.includes("unlock") && m.actions.includes("pull-rebuild-local"), JSON.stringify(m));
        await v.close();
      });

      test("hunt() releases held files, reports those no remote has, and stops at its timeout", async () => {
        const db = freshName();
        const passphrase = "hunting passphrase";
        const chunkIds = async () =>
          new Set((await couch(t, "GET", `/${db}/_all_docs`)).rows.map((r) => r.id).filter((id) => id.startsWith("h:")));
        const a = await livesync.open({ settings: { encrypt: true }, passphrase, remote: remote(db, { create: true }), host });
        const found = new Uint8Array(randomBytes(40 * 1024));
        await a.write("found.bin", found);
        await a.push();
        const before = await chunkIds();
        await a.write("lost.bin", new Uint8Array(randomBytes(40 * 1024)));
        await a.push();
        const lostIds = [...(await chunkIds())].filter((id) => !before.has(id));
        assert.ok(lostIds.length > 0);
        await a.close();

        const b = await livesync.open({ passphrase, remote: remote(db), host });
        const heldEvents = [];
        b.on("held", (e) => heldEvents.push(e));
        const counted = waitFor(b, "status", (e) => e.kind === "held-count" && e.held === 2);
        await b.pull({ metadataOnly: true });
        const held = await b.held();
        assert.deepEqual(held.map((f) => f.path), ["found.bin", "lost.bin"]);
        const status = await b.status();
        assert.equal(status.held, 2);
        assert.deepEqual(status.heldPaths, ["found.bin", "lost.bin"]);
        assert.equal(status.pendingChunks, held[0].missing + held[1].missing);
        assert.equal(held[1].missing, lostIds.length);
        const c = await counted;
        assert.equal(c.pendingChunks, status.pendingChunks, JSON.stringify(c));
        for (const f of held) {
          const e = heldEvents.find((x) => x.kind === "held" && x.path === f.path);
          assert.equal(e?.missing, f.missing, JSON.stringify(heldEvents));
        }

        // lost.bin's chunks leave the remote: no hunt can find them.
        for (const id of lostIds) {
          const doc = await couch(t, "GET", `/${db}/${encodeURIComponent(id)}`);
          await couch(t, "DELETE", `/${db}/${encodeURIComponent(id)}?rev=${doc._rev}`);
        }
        const settled = waitFor(b, "status", (e) => e.kind === "held-count" && e.held === 1);
        const r = await b.hunt({ once: true });
        assert.deepEqual(r.released.map((f) => f.path), ["found.bin"]);
        assert.deepEqual(r.held.map((f) => f.path), ["lost.bin"]);
        assert.equal(r.timedOut, false);
        assert.equal(r.found, held[0].missing);
        assert.equal(r.total, held[0].missing + held[1].missing);
        assert.equal(r.sources.length, 1);
        assert.ok(r.sources[0].canFetch && r.sources[0].requests > 0, JSON.stringify(r.sources));
        const [lost] = r.held;
        assert.equal(lost.missing, lostIds.length);
        assert.deepEqual(lost.reasons.map((x) => [x.code, x.chunks]), [["missing_chunks", lostIds.length]]);
        assert.ok(lost.lastAttempt > 0 && lost.lastResult, JSON.stringify(lost));
        assert.deepEqual(Buffer.from(await b.read("found.bin")), Buffer.from(found));
        assert.deepEqual(heldEvents.filter((e) => e.kind === "released").map((e) => e.path), ["found.bin"]);
        const s = await settled;
        assert.equal(s.pendingChunks, lostIds.length);

        // A hunt that keeps going stops at its timeout with what is still held.
        const started = Date.now();
        const bounded = await b.hunt({ timeout: 300 });
        assert.ok(Date.now() - started < 5000, `the hunt took ${Date.now() - started} ms`);
        assert.equal(bounded.timedOut, true);
        assert.deepEqual(bounded.released, []);
        assert.deepEqual(bounded.held.map((f) => f.path), ["lost.bin"]);
        await rejectsWith(b.hunt({ timeout: "soon" }), "bad_options");
        await b.close();
      });
    });
  }
});
