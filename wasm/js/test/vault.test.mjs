// The wasm module through its loader under Node: a memory replica, HTTP
// through Node's own fetch passed as host.fetch, against the
// CouchDB-protocol test server named by LIVESYNC_TEST_COUCHDB_URL (with
// _USER and _PASSWORD). Run wasm/build.sh first. Without a server the
// tests are skipped, except under CI=true, where they fail.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes, webcrypto } from "node:crypto";
import { readFile } from "node:fs/promises";
import { loadAPI } from "./servers.mjs";
import { rejectsWith } from "./rejects.mjs";

const server = process.env.LIVESYNC_TEST_COUCHDB_URL;
const user = process.env.LIVESYNC_TEST_COUCHDB_USER ?? "";
const password = process.env.LIVESYNC_TEST_COUCHDB_PASSWORD ?? "";
const ci = process.env.CI === "true";
const skip = !server && !ci ? "LIVESYNC_TEST_COUCHDB_URL is not set" : false;

// Key derivation must go through WebCrypto: count the host's calls.
let derivations = 0;
const subtle = (globalThis.crypto ?? webcrypto).subtle; // the loader installs webcrypto where Node lacks the global
const deriveBits = subtle.deriveBits.bind(subtle);
subtle.deriveBits = (...args) => {
  derivations++;
  return deriveBits(...args);
};

let livesync;
before(async () => {
  if (!server && ci) {
    throw new Error("LIVESYNC_TEST_COUCHDB_URL is not set, and CI=true: the wasm tests need the test server");
  }
  livesync = await loadAPI();
});
// Without exit, Node waits for a timer Go's runtime left behind.
after(async () => {
  await livesync?.exit();
});

// Setup URIs the plugin's own library (octagonal-wheels) made, with the
// settings objects they hold.
const vectors = JSON.parse(await readFile(new URL("../../../engine/setupuri/testdata/upstream.json", import.meta.url)));

function freshDatabase() {
  return `${server.replace(/\/+$/, "")}/wasm-${Date.now()}-${randomBytes(4).toString("hex")}`;
}

function remote(url, extra = {}) {
  return { url, user, password, ...extra };
}

let fetches = 0;
const host = {
  fetch: (...args) => {
    fetches++;
    return fetch(...args);
  },
};
const passphrase = "correct horse battery staple";

test("a new E2EE vault is written, pushed, pulled by a second replica, read byte for byte and deleted", { skip }, async () => {
  const db = freshDatabase();
  const laptop = await livesync.open({
    settings: { encrypt: true, usePathObfuscation: true },
    passphrase,
    remote: remote(db, { create: true }),
    storage: "memory",
    host,
  });
  const text = "# Today\nbuy milk\n";
  const binary = new Uint8Array(randomBytes(200 * 1024));
  const mtime = Date.UTC(2024, 0, 2, 3, 4, 5);
  const w = await laptop.write("notes/today.md", text, { mtime, ctime: mtime - 1000 });
  assert.equal(w.path, "notes/today.md");
  assert.equal(w.size, Buffer.byteLength(text));
  assert.equal(w.mtime, mtime);
  await laptop.write("attachments/blob.bin", binary);
  const before = fetches;
  const pushed = await laptop.push();
  assert.ok(pushed.push.written > 0, JSON.stringify(pushed));
  assert.ok(fetches > before, "HTTP did not go through host.fetch");

  // The remote holds only ciphertext.
  const auth = "Basic " + Buffer.from(`${user}:${password}`).toString("base64");
  const raw = await (await fetch(`${db}/_all_docs?include_docs=true`, { headers: { Authorization: auth } })).text();
  assert.ok(!raw.includes("buy milk") && !raw.includes("notes/today.md"), "the remote holds plaintext");

  const phone = await livesync.open({ passphrase, remote: remote(db), host });
  const events = [];
  const off = phone.on("file", (e) => events.push(e));
  const pulled = await phone.pull();
  assert.ok(pulled.pull.written > 0, JSON.stringify(pulled));
  const files = (await phone.list("")).map((f) => f.path).sort();
  assert.deepEqual(files, ["attachments/blob.bin", "notes/today.md"]);
  assert.equal(await phone.read("notes/today.md", { text: true }), text);
  const got = await phone.read("attachments/blob.bin");
  assert.ok(got instanceof Uint8Array);
  assert.deepEqual(Buffer.from(got), Buffer.from(binary));
  const [stat] = await phone.list("notes/");
  assert.equal(stat.mtime, mtime);
  assert.equal(stat.held, false);
  assert.deepEqual(await phone.held(), []);

  await laptop.delete("notes/today.md");
  await laptop.push();
  await phone.pull();
  await rejectsWith(phone.read("notes/today.md"), "not_found");
  assert.deepEqual((await phone.list("")).map((f) => f.path), ["attachments/blob.bin"]);
  await new Promise((resolve) => setImmediate(resolve)); // events are delivered asynchronously
  off();
  const seen = events.map((e) => `${e.kind} ${e.path}`);
  assert.ok(seen.includes("created notes/today.md"), seen.join(", "));
  assert.ok(seen.includes("deleted notes/today.md"), seen.join(", "));

  await phone.close();
  await laptop.close();
  await rejectsWith(laptop.list(""), "closed");
});

// nextEvent resolves with the first event of v on topic that pred accepts.
function nextEvent(v, topic, pred) {
  return new Promise((resolve) => {
    const off = v.on(topic, (e) => {
      if (pred(e)) {
        off();
        resolve(e);
      }
    });
  });
}

test("a live sync brings changes through the streamed feed and stops at once", { skip, timeout: 20000 }, async () => {
  const db = freshDatabase();
  const laptop = await livesync.open({ settings: { encrypt: true }, passphrase, remote: remote(db, { create: true }), host });
  await laptop.write("first.md", "one\n");
  await laptop.push();
  const phone = await livesync.open({ passphrase, remote: remote(db), host });
  const first = nextEvent(phone, "file", (e) => e.kind === "created" && e.path === "first.md");
  const live = await phone.live();
  await first;
  const second = nextEvent(phone, "file", (e) => e.kind === "created" && e.path === "second.md");
  await laptop.write("second.md", "two\n");
  await laptop.push();
  await second;
  assert.equal(await phone.read("second.md", { text: true }), "two\n");
  // The feed is a long poll the server holds open; stopping aborts it
  // through the request's AbortController instead of waiting for it.
  const started = Date.now();
  await live.stop();
  assert.ok(Date.now() - started < 5000, `stop took ${Date.now() - started} ms`);
  await phone.close();
  await laptop.close();
});

test("a Setup URI opens the vault it describes; key derivation runs in WebCrypto", { skip }, async () => {
  assert.equal(livesync.webCrypto, true);
  const v = vectors.vectors.find((x) => x.name === "couchdb");
  assert.ok(v, "no couchdb vector");
  const db = freshDatabase();
  const before = derivations;
  // The URI's own server is not reachable here: remote overrides it.
  const laptop = await livesync.open({
    setupURI: v.uri,
    setupPassphrase: vectors.setupPassphrase,
    remote: remote(db, { create: true }),
    host,
  });
  assert.ok(derivations > before, "PBKDF2 did not go through crypto.subtle");
  await laptop.write("from-uri.md", "hello\n");
  await laptop.push();
  await laptop.close();
  // The same vault through its settings object: E2EE passphrase and
  // path obfuscation as the URI said.
  const phone = await livesync.open({ settings: v.settings, remote: remote(db), host });
  await phone.pull();
  assert.equal(await phone.read("from-uri.md", { text: true }), "hello\n");
  await phone.close();
  await rejectsWith(
    livesync.open({ setupURI: v.uri, setupPassphrase: "not it", remote: remote(db), host }),
    "wrong_passphrase",
  );
  await rejectsWith(livesync.open({ setupURI: v.uri, remote: remote(db), host }), "bad_options");
});

test("a metadata-only pull holds files until their chunks are read on demand", { skip }, async () => {
  const db = freshDatabase();
  const laptop = await livesync.open({ settings: { encrypt: true }, passphrase, remote: remote(db, { create: true }), host });
  const body = new Uint8Array(randomBytes(50 * 1024));
  await laptop.write("big.bin", body);
  await laptop.push();
  await laptop.close();

  const phone = await livesync.open({ passphrase, remote: remote(db), host });
  const heldEvents = [];
  phone.on("held", (e) => heldEvents.push(e));
  await phone.pull({ metadataOnly: true });
  const held = await phone.held();
  assert.deepEqual(held.map((f) => f.path), ["big.bin"]);
  assert.ok(held[0].missing > 0 && held[0].held, JSON.stringify(held[0]));
  const got = await phone.read("big.bin"); // the chunks are fetched from the remote
  assert.deepEqual(Buffer.from(got), Buffer.from(body));
  assert.deepEqual(await phone.held(), []);
  await new Promise((resolve) => setImmediate(resolve));
  const kinds = heldEvents.filter((e) => e.path === "big.bin").map((e) => e.kind);
  assert.deepEqual(kinds, ["held", "released"]);
  await phone.close();
});

test("a wrong password is refused with code unauthorized", { skip: skip || (!password && "no password") }, async () => {
  await rejectsWith(
    livesync.open({ settings: {}, remote: { url: freshDatabase(), user, password: password + "-wrong", create: true }, host }),
    "unauthorized",
  );
});

test("a wrong passphrase is refused with code wrong_passphrase", { skip }, async () => {
  const db = freshDatabase();
  const a = await livesync.open({ settings: { encrypt: true }, passphrase, remote: remote(db, { create: true }), host });
  await a.write("secret.md", "top secret\n");
  await a.push();
  await a.close();
  await rejectsWith(livesync.open({ passphrase: "not the passphrase", remote: remote(db), host }), "wrong_passphrase");
});

test("an unreachable server is refused with code unreachable", { skip }, async () => {
  await rejectsWith(
    livesync.open({ settings: {}, remote: { url: "http://127.0.0.1:9/nothing-here" }, host }),
    "unreachable",
  );
});

test("wrong options are refused with code bad_options", { skip }, async () => {
  await rejectsWith(livesync.open({ storage: "floppy", remote: remote(freshDatabase()), host }), "bad_options");
  await rejectsWith(livesync.open({ remote: { url: "not a url" }, host }), "bad_options");
  const v = await livesync.open({ settings: {} });
  assert.throws(() => v.on("nonsense", () => {}), (err) => err.code === "bad_options");
  await rejectsWith(v.push(), "bad_options");
  // Without a remote there is nothing to examine or hunt on.
  await rejectsWith(v.doctor(), "bad_options");
  await rejectsWith(v.hunt({ once: "yes" }), "bad_options");
  const h = await v.hunt({ once: true });
  assert.deepEqual([h.released, h.held, h.sources, h.timedOut], [[], [], [], false]);
  const st = await v.status();
  assert.deepEqual([st.files, st.held, st.pendingChunks, st.remotes], [0, 0, 0, []]);
  await v.close();
});
