// AES-256-GCM on 1 KiB chunks in headless Chromium: Go's crypto/aes +
// crypto/cipher inside a wasm module against WebCrypto called from Go
// through syscall/js (each call awaited), encrypt and decrypt, 1 and 16
// calls in flight. Also the engine's V2 chunk cipher (HKDF per chunk,
// engine/e2ee) against the same with WebCrypto's AES, and WebCrypto from
// JavaScript alone as the floor.
//
//   node aes.mjs WWW_DIR        (WWW_DIR holds aesgcm.html, aesgcm.wasm, wasm_exec.js)
import { launchBrowser } from "../../browser/harness.mjs";
import { serveIsolated, median, fmt, table } from "./lib.mjs";

const dir = process.argv[2];
const runs = Number(process.env.RUNS ?? 3);
const ms = Number(process.env.AES_MS ?? 1000);
const impls = ["go", "webcrypto", "webcrypto-batch", "go-v2", "webcrypto-v2", "webcrypto-v2-batch", "js-webcrypto"];
const label = {
  go: "Go crypto/aes GCM (wasm)",
  webcrypto: "WebCrypto from Go (syscall/js + Promise)",
  "webcrypto-batch": "WebCrypto from Go, one await per batch (batch = in-flight count)",
  "webcrypto-v2-batch": "V2 with WebCrypto AES, one await per batch",
  "go-v2": "engine/e2ee V2 (HKDF + GCM, Go)",
  "webcrypto-v2": "V2 with WebCrypto AES (HKDF in Go, importKey + encrypt)",
  "js-webcrypto": "WebCrypto from JS only (floor)",
};

const server = await serveIsolated(dir);
const browser = await launchBrowser();
const res = {};
try {
  const page = await browser.newPage();
  await page.goto(server.url + "aesgcm.html");
  await page.waitForFunction(() => globalThis.ready === true);
  const isolated = await page.evaluate(() => crossOriginIsolated);
  if (!isolated) console.error("warning: page not cross-origin isolated, timers are coarse (100 µs)");
  // warm up every path once
  for (const impl of impls) {
    for (const op of ["encrypt", "decrypt"]) await call(page, impl, op, 1, 200);
  }
  for (let r = 0; r < runs; r++) {
    for (const op of ["encrypt", "decrypt"]) {
      for (const conc of [1, 16]) {
        for (const impl of impls) {
          const x = await call(page, impl, op, conc, ms);
          (res[`${impl}|${op}|${conc}`] ??= []).push(x);
          console.error(`run ${r + 1}/${runs} ${impl} ${op} c${conc}: ${fmt(x.opsPerSec)} ops/s p50 ${fmt(x.p50us, 1)} µs`);
        }
      }
    }
  }
  const ua = await page.evaluate(() => navigator.userAgent);
  console.log(`\nAES-256-GCM, 1 KiB chunks, headless ${ua.match(/Chrome\/[\d.]+/)?.[0]}, medians of ${runs} runs of ${ms} ms`);
  const rows = [];
  for (const op of ["encrypt", "decrypt"]) {
    for (const impl of impls) {
      const c1 = res[`${impl}|${op}|1`], c16 = res[`${impl}|${op}|16`];
      rows.push([op, label[impl], fmt(median(c1.map((x) => x.p50us)), 1), fmt(median(c1.map((x) => x.p99us)), 1),
        fmt(median(c1.map((x) => x.opsPerSec))), fmt(median(c16.map((x) => x.opsPerSec))),
        fmt(median(c16.map((x) => x.opsPerSec)) * 1024 / 1e6, 1)]);
    }
  }
  console.log(table(["op", "implementation", "latency p50 µs (1 in flight)", "p99 µs", "chunks/s (1 in flight)",
    "chunks/s (16 in flight)", "MB/s (16)"], rows));
} finally {
  await browser.close();
  await server.close();
}

function call(page, impl, op, conc, ms) {
  if (impl === "js-webcrypto") return page.evaluate((o) => jsWebCrypto(o), { op, conc, ms });
  return page.evaluate((o) => aesgcmBench(o), { impl, op, conc, ms });
}
