// The wasm module's S3 remote under Node: a journal bucket on the S3 test
// server (versitygw) named by LIVESYNC_TEST_S3_ENDPOINT (with _ACCESS_KEY,
// _SECRET_KEY and _REGION), every request signed by minio-go inside the
// module and sent through Node's own fetch passed as host.fetch. Run
// wasm/build.sh first (or set LIVESYNC_WASM_DIST to a folder holding
// another build of livesync.wasm with wasm_exec.js and index.mjs). Without a server the tests are skipped, except
// under CI=true, where they fail.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { rejectsWith } from "./rejects.mjs";
import { createBucket as createS3Bucket } from "../../../tests/s3server/createbucket.mjs";

const env = process.env;
const ci = env.CI === "true";
const skip = !env.LIVESYNC_TEST_S3_ENDPOINT && !ci ? "LIVESYNC_TEST_S3_ENDPOINT is not set" : false;
// The test server's endpoint is host:port (plain HTTP) or an https:// URL.
const endpoint = /^https?:\/\//.test(env.LIVESYNC_TEST_S3_ENDPOINT ?? "")
  ? env.LIVESYNC_TEST_S3_ENDPOINT
  : `http://${env.LIVESYNC_TEST_S3_ENDPOINT}`;
const accessKey = env.LIVESYNC_TEST_S3_ACCESS_KEY ?? "";
const secretKey = env.LIVESYNC_TEST_S3_SECRET_KEY ?? "";
const region = env.LIVESYNC_TEST_S3_REGION || "us-east-1";
const passphrase = "correct horse battery staple";

let livesync;
before(async () => {
  if (skip === false && !env.LIVESYNC_TEST_S3_ENDPOINT) {
    throw new Error("LIVESYNC_TEST_S3_ENDPOINT is not set, and CI=true: the wasm S3 tests need the test server");
  }
  const dist = env.LIVESYNC_WASM_DIST ?? fileURLToPath(new URL("../../dist/", import.meta.url));
  const { load } = await import(join(dist, "index.mjs"));
  livesync = await load();
});
// Without exit, Node waits for a timer Go's runtime left behind.
after(async () => {
  await livesync?.exit();
});

// Every request the module makes goes through host.fetch; the test
// counts them and remembers the methods it saw.
const seen = [];
const host = {
  fetch: (url, init) => {
    const u = new URL(url);
    seen.push(`${init.method} ${u.pathname}${u.search}`);
    return fetch(url, init);
  },
};

function createBucket(bucket) {
  return createS3Bucket({ url: endpoint, accessKey, secretKey, region }, bucket);
}

function freshBucket() {
  return `${env.LIVESYNC_TEST_S3_BUCKET_PREFIX || "lsgo-test-"}wasm-${randomBytes(6).toString("hex")}`;
}

function s3Remote(bucket, extra = {}) {
  return { kind: "s3", endpoint, bucket, accessKey, secretKey, region, prefix: "vault/", ...extra };
}

test("an E2EE vault pushed to an S3 bucket is pulled by a second replica and read byte for byte", { skip }, async () => {
  const bucket = freshBucket();
  await createBucket(bucket);
  seen.length = 0;
  const laptop = await livesync.open({
    settings: { encrypt: true, usePathObfuscation: true },
    passphrase,
    remote: s3Remote(bucket, { create: true }),
    host,
  });
  const text = "# Today\nbuy milk\n";
  const binary = new Uint8Array(randomBytes(300 * 1024));
  await laptop.write("notes/today.md", text);
  await laptop.write("assets/blob.bin", binary);
  const pushed = await laptop.push();
  assert.ok(pushed.push.written >= 2, `pushed ${JSON.stringify(pushed)}`);
  assert.ok(seen.some((r) => r.startsWith("PUT ")), `no PUT went through host.fetch: ${seen.join(", ")}`);

  // The second replica names no region: minio-go asks the server for the
  // bucket's location through host.fetch, then signs for it.
  seen.length = 0;
  const phone = await livesync.open({ passphrase, remote: s3Remote(bucket, { region: "" }), host });
  await phone.pull();
  assert.ok(seen.includes(`GET /${bucket}/?location=`), `no location request: ${seen.join(", ")}`);
  assert.equal(await phone.read("notes/today.md", { text: true }), text);
  assert.deepEqual(await phone.read("assets/blob.bin"), binary);
  const paths = (await phone.list()).map((f) => f.path).sort();
  assert.deepEqual(paths, ["assets/blob.bin", "notes/today.md"]);

  // A deletion travels back.
  await phone.delete("notes/today.md");
  await phone.push();
  await laptop.pull();
  assert.deepEqual((await laptop.list()).map((f) => f.path), ["assets/blob.bin"]);
  await rejectsWith(laptop.read("notes/today.md"), "not_found");
  await phone.close();
  await laptop.close();
});

test("the plugin's settings with remoteType MINIO select the S3 remote", { skip }, async () => {
  const bucket = freshBucket();
  await createBucket(bucket);
  const writer = await livesync.open({
    settings: { encrypt: true, usePathObfuscation: false },
    passphrase,
    remote: s3Remote(bucket, { prefix: "my-vault/", create: true }),
    host,
  });
  const body = new Uint8Array(randomBytes(64 * 1024));
  await writer.write("a.bin", body);
  await writer.push();
  await writer.close();

  const settings = {
    remoteType: "MINIO",
    endpoint: `${endpoint}/`,
    accessKey,
    secretKey,
    bucket,
    bucketPrefix: "my-vault/",
    region,
    forcePathStyle: true,
    encrypt: true,
    usePathObfuscation: false,
    passphrase,
  };
  const reader = await livesync.open({ settings, host });
  await reader.pull();
  assert.deepEqual(await reader.read("a.bin"), body);
  await reader.close();
});

test("an S3 remote's failures carry their codes", { skip }, async () => {
  const bucket = freshBucket();
  await createBucket(bucket);
  await rejectsWith(
    livesync.open({ passphrase, remote: s3Remote(bucket, { secretKey: "not-the-secret" }), host }),
    "unauthorized",
  );
  await rejectsWith(livesync.open({ passphrase, remote: s3Remote(freshBucket()), host }), "no_database");
  await rejectsWith(livesync.open({ passphrase, remote: { kind: "s3", bucket }, host }), "bad_options");
  await rejectsWith(livesync.open({ passphrase, remote: s3Remote(bucket, { kind: "ftp" }), host }), "bad_options");
});
