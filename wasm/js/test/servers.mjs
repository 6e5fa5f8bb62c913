// What the Node tests of the wasm module share: the servers they run
// against (the CouchDB-protocol test server named by
// LIVESYNC_TEST_COUCHDB_URL, and the livesync-relay binary, built and
// started here with its embedded store), the plugin's E2EE vault dump
// loaded into a database, the milestone locked as the plugin's "Rebuild
// everything" leaves it, and a PouchDB 9 client configured as LiveSync
// (tests/pouchdb/livesync-client.mjs, its "device" mode).
import { spawn, execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const root = fileURLToPath(new URL("../../../", import.meta.url));
export const ci = process.env.CI === "true";

// loadAPI loads the module from wasm/dist (or LIVESYNC_WASM_DIST, a
// private build folder holding livesync.wasm, wasm_exec.js and index.mjs).
export async function loadAPI() {
  const dist = process.env.LIVESYNC_WASM_DIST ?? join(root, "wasm/dist");
  const { load } = await import(join(dist, "index.mjs"));
  return load();
}

// A target is a CouchDB-protocol server the tests make databases on:
// {name, url, user, password, start(), stop()}.
export function couchTarget() {
  const url = process.env.LIVESYNC_TEST_COUCHDB_URL;
  return {
    name: "couchserver",
    // Without the server the tests skip, except under CI, where they fail.
    skip: !url && !ci ? "LIVESYNC_TEST_COUCHDB_URL is not set" : false,
    url: url?.replace(/\/+$/, ""),
    user: process.env.LIVESYNC_TEST_COUCHDB_USER ?? "",
    password: process.env.LIVESYNC_TEST_COUCHDB_PASSWORD ?? "",
    async start() {
      if (!url) {
        throw new Error("LIVESYNC_TEST_COUCHDB_URL is not set, and CI=true: the wasm tests need the test server");
      }
    },
    async stop() {},
  };
}

// relayTarget builds cmd/livesync-relay into a temporary folder and
// starts it there on 127.0.0.1 with a free port, its default embedded
// store and an admin whose password the test chose; stop ends it and
// removes the folder.
export function relayTarget() {
  let proc, dir;
  const t = {
    name: "relay",
    skip: false,
    user: "admin",
    password: randomBytes(12).toString("hex"),
    async start() {
      dir = await mkdtemp(join(tmpdir(), "wasm-relay-"));
      const bin = join(dir, "livesync-relay");
      await promisify(execFile)("go", ["build", "-o", bin, "./cmd/livesync-relay"], { cwd: root });
      proc = spawn(bin, ["--listen", "127.0.0.1:0"], {
        cwd: dir,
        env: { HOME: dir, TMPDIR: tmpdir(), PATH: process.env.PATH, LIVESYNC_RELAY_ADMIN_USER: t.user, LIVESYNC_RELAY_ADMIN_PASSWORD: t.password },
        stdio: ["ignore", "ignore", "pipe"],
      });
      // A test process that ends without after() (a crash) ends the relay too.
      process.once("exit", () => proc.kill("SIGKILL"));
      let out = "";
      t.url = await new Promise((resolve, reject) => {
        proc.stderr.setEncoding("utf8");
        proc.stderr.on("data", (s) => {
          out += s;
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m && out.includes("Stop with Ctrl-C")) {
            resolve(m[1]);
          }
        });
        proc.on("exit", (code) => reject(new Error(`livesync-relay exited (${code}) before it listened:\n${out}`)));
      });
      proc.stderr.resume();
    },
    async stop() {
      if (proc && proc.exitCode === null) {
        const exited = new Promise((resolve) => proc.on("exit", resolve));
        proc.kill("SIGKILL");
        await exited;
      }
      if (dir) {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
  return t;
}

// freshName is a new database name (CouchDB's rule ^[a-z][a-z0-9_$()+-]*$).
export function freshName() {
  return `wasm-${Date.now()}-${randomBytes(4).toString("hex")}`;
}

export function authHeader(t) {
  return "Basic " + Buffer.from(`${t.user}:${t.password}`).toString("base64");
}

// couch sends one request to the target as its admin and returns the
// JSON answer; a status other than 2xx throws.
export async function couch(t, method, path, body) {
  const res = await fetch(t.url + path, {
    method,
    headers: { Authorization: authHeader(t), "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) {
    throw new Error(`${method} ${path}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  }
  return JSON.parse(text);
}

// The plugin's E2EE vault (V2 encryption and path obfuscation) as the
// plugin left it on CouchDB: engine/testdata/vectors/vault-dump-e2ee.json,
// with the files it holds (their bytes from the vectors' inputs).
const vectors = join(root, "engine/testdata/vectors");
export const pluginNode = "vector-node-0001";

export async function readDump() {
  const d = JSON.parse(await readFile(join(vectors, "vault-dump-e2ee.json"), "utf8"));
  const files = new Map();
  for (const f of d.files) {
    files.set(f.vaultPath, f.source ? await readFile(join(vectors, f.source)) : Buffer.from(f.content, "utf8"));
  }
  return { dump: d, files, passphrase: d.fixedValues.passphrase };
}

// loadDump writes the dump's documents (new_edits=false, as a
// replicator) and _local documents into a new database of t and returns
// its name.
export async function loadDump(t, dump) {
  const db = freshName();
  await couch(t, "PUT", `/${db}`);
  const res = await couch(t, "POST", `/${db}/_bulk_docs`, { docs: dump.remote.allDocs.map((r) => r.doc), new_edits: false });
  const failed = res.filter((r) => r.error);
  if (failed.length) {
    throw new Error(`loading the dump: ${JSON.stringify(failed.slice(0, 3))}`);
  }
  for (const l of dump.remote.localDocs) {
    const { _rev, ...doc } = l;
    await couch(t, "PUT", `/${db}/${l._id}`, doc);
  }
  return db;
}

// lockAsPlugin changes the milestone of db as the plugin's "Rebuild
// everything" leaves it: locked, and only the plugin's device accepted.
export async function lockAsPlugin(t, db) {
  const path = `/${db}/_local/obsydian_livesync_milestone`;
  const m = await couch(t, "GET", path);
  m.locked = true;
  m.accepted_nodes = [pluginNode];
  m.node_chunk_info ??= {};
  m.node_chunk_info[pluginNode] ??= Object.values(m.node_chunk_info)[0] ?? { min: 0, max: 2, current: 2 };
  await couch(t, "PUT", path, m);
  return m;
}

// The PouchDB 9 client is in tests/pouchdb (npm ci there installs it).
export const pouchClient = join(root, "tests/pouchdb/livesync-client.mjs");
export const pouchInstalled = existsSync(join(root, "tests/pouchdb/node_modules/pouchdb-node"));

// pouchDevice starts one LiveSync device (PouchDB 9, in memory) on
// database db of t; call(op) sends it one command and resolves to its
// answer; close ends it.
export function pouchDevice(t, db) {
  const proc = spawn(process.execPath, [pouchClient, "--url", t.url, "--mode", "device", "--db", db], {
    env: { ...process.env, LIVESYNC_TEST_COUCHDB_USER: t.user, LIVESYNC_TEST_COUCHDB_PASSWORD: t.password },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (b) => {
    stderr += b;
  });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  return {
    async call(cmd) {
      proc.stdin.write(JSON.stringify(cmd) + "\n");
      const { value, done } = await lines.next();
      if (done) {
        throw new Error(`the PouchDB client ended: ${stderr}`);
      }
      const answer = JSON.parse(value);
      if (!answer.ok) {
        throw new Error(`PouchDB ${cmd.op}: ${answer.error}`);
      }
      return answer;
    },
    async close() {
      const exited = new Promise((resolve) => proc.on("exit", resolve));
      proc.stdin.end();
      await exited;
    },
  };
}
