// The wasm module in headless Chromium, on a page of a local origin,
// against an S3 journal bucket over CORS: a versitygw of the harness's own
// that answers CORS for the page's origin (--cors-allow-origin), built by
// tests/s3server/start.sh into .tools/. A second device (a page of
// another browser context) sees the first page's notes, the first page's
// live sync brings the second's, and the first device's IndexedDB replica
// reopens with nothing to read again.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { closeAll, freshName, launchBrowser, newPage, servePage, skipUnlessVersitygw, startS3 } from "./harness.mjs";
import { waitEvent } from "./vault.mjs";

const passphrase = "correct horse battery staple";
let site, s3, browser;
const skip = skipUnlessVersitygw();

before(async () => {
  if (skip) {
    return;
  }
  site = await servePage();
  s3 = await startS3({ corsOrigin: site.origin });
  browser = await launchBrowser();
});

after(closeAll);

const remoteOf = (bucket, extra = {}) => ({
  kind: "s3",
  endpoint: s3.url,
  bucket,
  accessKey: s3.accessKey,
  secretKey: s3.secretKey,
  region: s3.region,
  ...extra,
});

test("an E2EE vault on an S3 bucket in IndexedDB: written in one page, read by another device's page, the other's note brought by live sync, reopened with nothing read again", { timeout: 90000, skip }, async () => {
  const bucket = freshName("lsgo-browser");
  await s3.createBucket(bucket);
  const home = await browser.newContext();
  const page = await newPage(home, site.url("/"), { name: "s3" });
  const storage = { kind: "indexeddb", name: freshName("s3-idb") };
  const body = randomBytes(120 * 1024);
  const text = `from the browser ${randomBytes(8).toString("hex")}\n`;
  const pushed = await page.evaluate(
    async ({ remote, passphrase, text, body, storage }) => {
      await openVault("v", { settings: { encrypt: true, usePathObfuscation: true }, passphrase, remote, storage });
      await vaults.v.write("notes/page.md", text);
      await vaults.v.write("blob.bin", Uint8Array.from(atob(body), (c) => c.charCodeAt(0)));
      return vaults.v.push();
    },
    { remote: remoteOf(bucket, { create: true }), passphrase, text, body: body.toString("base64"), storage },
  );
  assert.ok(pushed.push.written > 0, JSON.stringify(pushed));
  assert.ok(
    (await page.evaluate(() => requests)).every((r) => r.url.startsWith(s3.url)),
    "a request of the S3 vault went elsewhere",
  );

  // Another device: a page of its own browser context (its own storage).
  const ctx = await browser.newContext();
  const other = await newPage(ctx, site.url("/"), { name: "s3-other" });
  const seen = await other.evaluate(
    async ({ remote, passphrase }) => {
      await openVault("v", { passphrase, remote });
      await vaults.v.pull();
      const blob = await vaults.v.read("blob.bin");
      let bin = "";
      for (const b of blob) {
        bin += String.fromCharCode(b);
      }
      return { text: await vaults.v.read("notes/page.md", { text: true }), blob: btoa(bin) };
    },
    { remote: remoteOf(bucket), passphrase },
  );
  assert.equal(seen.text, text);
  assert.ok(Buffer.from(seen.blob, "base64").equals(body), "blob.bin differs on the other device");

  await page.evaluate(async () => {
    window.live = await vaults.v.live();
  });
  await other.evaluate(async () => {
    await vaults.v.write("notes/other.md", "from the other device\n");
    await vaults.v.push();
    await vaults.v.close();
  });
  await waitEvent(page, "v", (e) => e.kind === "created" && e.path === "notes/other.md", undefined, { timeout: 60000 });
  const got = await page.evaluate(async () => {
    const t = await vaults.v.read("notes/other.md", { text: true });
    await window.live.stop();
    await vaults.v.close();
    return t;
  });
  assert.equal(got, "from the other device\n");
  await ctx.close();
  await page.close();

  // The first device's page again: its IndexedDB replica has every note,
  // and the bucket's packs it read are not read again.
  const again = await newPage(home, site.url("/"), { name: "s3-again" });
  const reopened = await again.evaluate(
    async ({ remote, passphrase, storage }) => {
      await openVault("v", { passphrase, remote, storage });
      const files = (await vaults.v.list("")).map((f) => f.path).sort();
      const pulled = (await vaults.v.pull()).pull;
      await vaults.v.close();
      return { files, pulled };
    },
    { remote: remoteOf(bucket), passphrase, storage },
  );
  assert.deepEqual(reopened.files, ["blob.bin", "notes/other.md", "notes/page.md"]);
  assert.equal(reopened.pulled.read, 0, `the reopened vault read ${reopened.pulled.read} documents again`);
  await home.close();
});
