// Creates a bucket on an S3 test server with a SigV4-signed PUT, for the
// Node and browser tests of the wasm build: livesync-go never creates
// buckets. Needs only Node's crypto and fetch.
import { createHash, createHmac } from "node:crypto";

/**
 * Creates bucket on server ({url, accessKey, secretKey, region}) with a
 * SigV4-signed PUT (livesync-go never creates buckets).
 */
export async function createBucket(server, bucket) {
  const url = new URL(`/${bucket}`, server.url);
  const now = new Date().toISOString().replace(/[-:]|\.\d{3}/g, "");
  const day = now.slice(0, 8);
  const payload = createHash("sha256").update("").digest("hex");
  const headers = { host: url.host, "x-amz-content-sha256": payload, "x-amz-date": now };
  const names = Object.keys(headers).sort();
  const canonical = ["PUT", url.pathname, "", ...names.map((n) => `${n}:${headers[n]}`), "", names.join(";"), payload].join("\n");
  const scope = `${day}/${server.region}/s3/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", now, scope, createHash("sha256").update(canonical).digest("hex")].join("\n");
  const hmac = (key, data) => createHmac("sha256", key).update(data).digest();
  let key = hmac(`AWS4${server.secretKey}`, day);
  for (const part of [server.region, "s3", "aws4_request"]) {
    key = hmac(key, part);
  }
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  const auth = `AWS4-HMAC-SHA256 Credential=${server.accessKey}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  const { host, ...sent } = headers;
  const r = await fetch(url, { method: "PUT", headers: { ...sent, authorization: auth } });
  if (!r.ok) {
    throw new Error(`create bucket ${bucket}: HTTP ${r.status} ${await r.text()}`);
  }
}
