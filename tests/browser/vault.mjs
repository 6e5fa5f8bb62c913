// Helpers the browser tests share beyond the harness: a Node-side
// LiveSync client (the same wasm module, loaded in Node), copying a
// vault's documents between databases in a chosen order, a real PouchDB 9
// client, and waiting on a page's recorded events.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { buildWasm, couchFetch, repoRoot } from "./harness.mjs";

let nodeApi;
/** The wasm module loaded in Node (a second, independent client); exit() it in after(). */
export async function nodeLivesync() {
  nodeApi ??= (async () => {
    const { load } = await import(pathToFileURL(path.join(await buildWasm(), "index.mjs")));
    return load();
  })();
  return nodeApi;
}

/** Every document of db (winning revisions, with _rev), _design documents left out. */
export async function allDocs(server, db) {
  const r = await couchFetch(server, `/${db}/_all_docs?include_docs=true`);
  if (!r.ok) {
    throw new Error(`GET ${db}/_all_docs: ${r.status} ${await r.text()}`);
  }
  return (await r.json()).rows.map((row) => row.doc).filter((d) => d && !d._id.startsWith("_design/"));
}

/** Stores docs in db as they are (new_edits=false, the replication's way). */
export async function putDocs(server, db, docs) {
  const r = await couchFetch(server, `/${db}/_bulk_docs`, { method: "POST", body: JSON.stringify({ docs, new_edits: false }) });
  if (!r.ok) {
    throw new Error(`POST ${db}/_bulk_docs: ${r.status} ${await r.text()}`);
  }
}

export const isChunk = (d) => d.type === "leaf" || d._id.startsWith("h:");

/**
 * A real PouchDB 9 client (tests/pouchdb's pouchdb-node with the memory
 * adapter): replicates db from server into a fresh memory database and
 * returns its documents.
 */
export async function pouchPull(server, db) {
  const require = createRequire(path.join(repoRoot, "tests/pouchdb/package.json"));
  const PouchDB = require("pouchdb-node").plugin(require("pouchdb-adapter-memory"));
  const remote = new PouchDB(`${server.url}/${db}`, { adapter: "http", skip_setup: true, auth: { username: server.user, password: server.password } });
  const local = new PouchDB(`local-${db}-${Date.now()}`, { adapter: "memory" });
  const res = await local.replicate.from(remote, { batch_size: 25, batches_limit: 25 });
  if (res.doc_write_failures > 0 || res.status !== "complete") {
    throw new Error(`PouchDB replication: ${JSON.stringify(res)}`);
  }
  const docs = (await local.allDocs({ include_docs: true })).rows.map((r) => r.doc);
  await local.destroy();
  await remote.close();
  return docs;
}

/**
 * Waits until the page's vault name recorded an event pred(event, arg)
 * accepts, and returns it. pred runs in the page: it sees only its
 * arguments.
 */
export async function waitEvent(page, name, pred, arg, { timeout = 30000 } = {}) {
  let h;
  try {
    h = await page.waitForFunction(
      ({ name, src, arg }) => {
        const pred = new Function(`return (${src})`)();
        return (window.events[name] ?? []).find((e) => pred(e, arg));
      },
      { name, src: pred.toString(), arg },
      { timeout, polling: 50 },
    );
  } catch (err) {
    const seen = await events(page, name).catch(() => []);
    const kinds = seen.filter((e) => e.topic === "file").map((e) => `${e.kind} ${e.path}`);
    throw new Error(`no event ${pred}${arg === undefined ? "" : ` (${JSON.stringify(arg)})`} within ${timeout} ms; file events: ${kinds.join(", ") || "none"} (${err.message.split("\n")[0]})`);
  }
  return h.jsonValue();
}

/** The events of the page's vault name so far. */
export function events(page, name) {
  return page.evaluate((name) => window.events[name], name);
}
