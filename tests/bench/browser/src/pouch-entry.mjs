// The JavaScript stack Self-hosted LiveSync uses today, bundled for the
// page (esbuild → pouch.js): PouchDB 9's browser build (idb adapter),
// transform-pouch for the E2EE transform on the remote, and
// octagonal-wheels' HKDF cipher (encryption/hkdf decrypt, what commonlib's
// decryptHKDF calls). Sets globalThis.PouchBench = {pull, coldStart}.
//
// The transform is commonlib src/pouchdb/encryption.ts's read direction
// (outgoing) on the remote database: chunks flagged e_ have their data
// decrypted, obfuscated metadata ("/\:" + "%=…" path) has path, mtime,
// ctime, size and children restored; the local database holds plaintext,
// as the plugin's does.
import PouchDB from "pouchdb-browser";
import transform from "transform-pouch";
import { decrypt, encrypt } from "octagonal-wheels/encryption/hkdf";

PouchDB.plugin(transform);

const SYNC_PARAMETERS = "_local/obsidian_livesync_sync_parameters";

// The plugin's local database options (LiveSync's LiveSyncLocalDB, idb adapter).
function localDB(name) {
  return new PouchDB(name, { adapter: "idb", revs_limit: 100, deterministic_revs: true, auto_compaction: true });
}

function b64bytes(s) {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

function decryptingRemote(url, user, password, passphrase, salt) {
  const remote = new PouchDB(url, { auth: { username: user, password }, skip_setup: true });
  remote.transform({
    outgoing: async (doc) => {
      if ((doc._id.startsWith("h:+") || doc._id === "syncinfo") && doc.e_ === true) {
        doc.data = await decrypt(doc.data, passphrase, salt);
        delete doc.e_;
      }
      if (doc._id.startsWith("f:") && typeof doc.path === "string" && doc.path.startsWith("/\\:")) {
        const m = JSON.parse(await decrypt(doc.path.slice(3), passphrase, salt));
        doc.path = m.path;
        doc.mtime = m.mtime;
        doc.ctime = m.ctime;
        doc.size = m.size;
        if (m.children) {
          doc.children = m.children;
        }
      }
      return doc;
    },
  });
  return remote;
}

async function sha256hex(s) {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// path2id with path obfuscation (commonlib path2id_base): f: + hex(SHA-256(hex(SHA-256(passphrase)) + ":" + lower(path))).
async function path2id(path, passphrase) {
  return "f:" + (await sha256hex((await sha256hex(passphrase)) + ":" + path.toLowerCase()));
}

// readNote reads a note as the plugin does: the metadata document, then its chunks by id.
async function readNote(db, path, passphrase) {
  const meta = await db.get(await path2id(path, passphrase));
  const res = await db.allDocs({ keys: meta.children, include_docs: true });
  const parts = res.rows.map((r) => {
    if (!r.doc) {
      throw new Error(`chunk ${r.key} missing`);
    }
    return r.doc.data;
  });
  return parts.join("");
}

/** Pulls the remote vault into a new IndexedDB database (replicate.from, LiveSync's batch settings). */
async function pull({ url, user, password, passphrase, name, batchSize = 25, batchesLimit = 25 }) {
  const t0 = performance.now();
  const plain = new PouchDB(url, { auth: { username: user, password }, skip_setup: true });
  const params = await plain.get(SYNC_PARAMETERS);
  const salt = b64bytes(params.pbkdf2salt);
  const remote = decryptingRemote(url, user, password, passphrase, salt);
  const local = localDB(name);
  const r = await local.replicate.from(remote, { batch_size: batchSize, batches_limit: batchesLimit });
  const ms = performance.now() - t0;
  const info = await local.info();
  await local.close();
  await remote.close();
  return { ms, docs: r.docs_written, docCount: info.doc_count, salt: params.pbkdf2salt };
}

/**
 * Opens the pulled database and reads a note. With remote, before the
 * read it also does what the plugin does to get ready to sync: reads the
 * remote's sync parameters and milestone and derives the key (as
 * octagonal-wheels does on the first encrypt/decrypt: PBKDF2 310000 + HKDF).
 */
async function coldStart({ name, passphrase, path, remote }) {
  const t = { script: performance.now() };
  const db = localDB(name);
  const info = await db.info();
  if (remote) {
    const r = new PouchDB(remote.url, { auth: { username: remote.user, password: remote.password }, skip_setup: true });
    const [params] = await Promise.all([r.get(SYNC_PARAMETERS), r.get("_local/obsydian_livesync_milestone")]);
    await encrypt("x", passphrase, b64bytes(params.pbkdf2salt));
  }
  t.open = performance.now();
  const text = await readNote(db, path, passphrase);
  t.read = performance.now();
  await db.close();
  return { t, docCount: info.doc_count, bytes: text.length, text };
}

globalThis.PouchBench = { pull, coldStart, readNote, path2id };
