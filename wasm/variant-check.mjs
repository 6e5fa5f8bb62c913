// Checks that a build of livesync.wasm loads and runs, and that it has
// exactly the remote adapters its variant promises:
//
//   node wasm/variant-check.mjs DIR MODULE.wasm core|couch|full|p2p
//
// DIR holds the loader (index.mjs) and Go's wasm_exec.js, as wasm/dist.
// It opens a memory vault, writes and reads a note, then opens a CouchDB
// and an S3 remote through a host fetch that always fails: an adapter the
// build has fails with code "unreachable", one it lacks with
// "unsupported"; only the p2p variant's vault has p2p(). wasm/size.sh
// runs it on every module it measures.
import assert from "node:assert/strict";
import { join, resolve } from "node:path";
import { readFile } from "node:fs/promises";

const [dir, file, variant] = process.argv.slice(2);
const has = { core: [], couch: ["couchdb"], full: ["couchdb", "s3"], p2p: ["couchdb", "s3"] }[variant];
if (!dir || !file || !has) {
  console.error("usage: node wasm/variant-check.mjs DIR MODULE.wasm core|couch|full|p2p");
  process.exit(2);
}
const { load } = await import(join(resolve(dir), "index.mjs"));
const livesync = await load({ wasm: await readFile(resolve(file)) });
try {
  const v = await livesync.open({ settings: {} });
  await v.write("a.md", "hello");
  assert.equal(await v.read("a.md", { text: true }), "hello");
  assert.equal(typeof v.p2p, variant === "p2p" ? "function" : "undefined", `${variant}: vault.p2p`);
  await v.close();

  const host = { fetch: () => Promise.reject(new TypeError("offline")) };
  const remotes = {
    couchdb: { url: "http://127.0.0.1:9/db" },
    s3: { kind: "s3", endpoint: "http://127.0.0.1:9", bucket: "bucket", accessKey: "k", secretKey: "s", region: "r" },
  };
  for (const [kind, remote] of Object.entries(remotes)) {
    const want = has.includes(kind) ? "unreachable" : "unsupported";
    await assert.rejects(livesync.open({ settings: {}, remote, host }), (err) => {
      assert.equal(err.code, want, `${variant}: a ${kind} remote: ${err.message}`);
      return true;
    });
  }
  console.log(`${file}: loads, runs, remotes ${has.length ? has.join(" and ") : "none"}`);
} finally {
  await livesync.exit();
}
