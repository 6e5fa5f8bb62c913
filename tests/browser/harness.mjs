// Harness of the real-browser tests of the wasm build: Debian's headless
// Chromium (/usr/bin/chromium, or $LIVESYNC_TEST_CHROMIUM) driven by
// playwright-core, never a downloaded browser; pages served from a local
// origin on 127.0.0.1 that load the module's loader (index.mjs) and reach
// the test servers over CORS.
//
// API (every server binds 127.0.0.1 on a free port; every stop() is
// idempotent; call them in after()/t.after()):
//
//   env                      what the test servers' variables say:
//     env.ci                 CI=true: a missing server is a failure, not a skip
//     env.couch              {url, user, password} from LIVESYNC_TEST_COUCHDB_*, or null
//     env.s3                 {endpoint, accessKey, secretKey, region, bucketPrefix} from LIVESYNC_TEST_S3_*, or null
//   skipUnless(...names)     false when every environment variable is set;
//                            otherwise a skip reason, or (under CI=true) throws
//   buildWasm()              → dir: livesync.wasm, wasm_exec.js, index.mjs,
//                            index.d.ts, package.json built into a temporary
//                            folder (go build -trimpath -ldflags='-s -w', as
//                            wasm/build.sh), once per process; concurrent
//                            rebuilds of wasm/dist do not disturb a run.
//                            $LIVESYNC_TEST_WASM_DIR names a ready folder instead.
//   goBuild(pkg)             → path of a binary of pkg (e.g. "./cmd/livesync-relay")
//                            built once per process into a temporary folder
//   startRelay({corsOrigins, config, env, dataDir})
//                            → {url, user, password, dataDir, stop(), output()}
//                            cmd/livesync-relay ($LIVESYNC_TEST_RELAY_BIN, or built) with its embedded store in a
//                            temporary data folder (or dataDir), an admin
//                            with a random password, cors_origins as given
//                            (default ["*"]); config: extra TOML lines
//   startS3({corsOrigin})   → {endpoint, url, accessKey, secretKey, region, createBucket(name), stop()}
//                            a versitygw of its own (.tools/versitygw, built by
//                            tests/s3server/start.sh) with
//                            --cors-allow-origin corsOrigin (default "*")
//   skipUnlessVersitygw()   false when .tools/versitygw is built, else a skip
//                            reason (under CI=true: throws)
//   createBucket(server, name) creates a bucket with a SigV4-signed PUT
//   corsProxy(target)       → {url, stop()} an HTTP proxy to target that
//                            answers CORS for any origin (for the
//                            express-pouchdb test server, which has none)
//   serveStatic(mounts)     → {origin, url(path), stop()}; mounts maps a
//                            URL prefix to a folder, e.g. {"/": pageDir,
//                            "/wasm/": await buildWasm()}; .wasm is served as
//                            application/wasm
//   servePage()             → serveStatic of this folder's page/ at "/" and the
//                            built module at "/wasm/": page/index.html loads
//                            /wasm/index.mjs and sets window.livesync
//   launchBrowser()         → playwright Browser (fresh profile); close it
//   launchPersistent(dir)   → playwright BrowserContext over the profile
//                            folder dir (IndexedDB lives there across
//                            launches); close it
//   newPage(ctxOrBrowser, url, {name})
//                            → Page opened at url, its console and page errors
//                            forwarded to stderr (prefixed [name]), waits
//                            until window.livesync is loaded
//   closeAll()               closes every browser and stops every server
//                            still open (call it in after(): a test that
//                            failed half-way leaves them, and they keep
//                            the test file's process alive)
//   tempDir(prefix)          → a fresh temporary folder, removed at exit
//   freshName(prefix)        → a unique lowercase name (databases, buckets)
//   couchFetch(server, path, init)
//                            → fetch with the server's Basic credentials
//   chromiumArgs             the flags Chromium runs with
import { spawn, execFile } from "node:child_process";
import { createServer, request as httpRequest } from "node:http";
import { randomBytes } from "node:crypto";
import { createBucket } from "../s3server/createbucket.mjs";
import { mkdtempSync, rmSync, existsSync, writeFileSync, mkdirSync } from "node:fs";
import { copyFile, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium } from "playwright-core";

const execFileP = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../..");

export const chromiumArgs = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const chromiumPath = process.env.LIVESYNC_TEST_CHROMIUM || "/usr/bin/chromium";

const e = process.env;
export const env = {
  ci: e.CI === "true",
  couch: e.LIVESYNC_TEST_COUCHDB_URL
    ? { url: e.LIVESYNC_TEST_COUCHDB_URL.replace(/\/+$/, ""), user: e.LIVESYNC_TEST_COUCHDB_USER ?? "", password: e.LIVESYNC_TEST_COUCHDB_PASSWORD ?? "" }
    : null,
  s3: e.LIVESYNC_TEST_S3_ENDPOINT
    ? {
        endpoint: e.LIVESYNC_TEST_S3_ENDPOINT,
        accessKey: e.LIVESYNC_TEST_S3_ACCESS_KEY ?? "",
        secretKey: e.LIVESYNC_TEST_S3_SECRET_KEY ?? "",
        region: e.LIVESYNC_TEST_S3_REGION || "us-east-1",
        bucketPrefix: e.LIVESYNC_TEST_S3_BUCKET_PREFIX || "lsgo-test-",
      }
    : null,
};

/** false when every variable in names is set, else a skip reason; under CI=true a missing one throws. */
export function skipUnless(...names) {
  const missing = names.filter((n) => !process.env[n]);
  if (missing.length === 0) {
    return false;
  }
  const msg = `${missing.join(", ")} not set`;
  if (env.ci) {
    throw new Error(`${msg}, and CI=true: the browser tests need the test servers`);
  }
  return msg;
}

// Everything started here is stopped when the process exits, even when a
// test forgot to (or failed before it could).
const cleanups = new Set();
function onExit(fn) {
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}
// Browsers and servers still open, for closeAll: a test that failed
// half-way leaves them, and an open browser keeps the test file's process
// alive.
const open = new Set();
function track(close) {
  const entry = { close };
  open.add(entry);
  return () => open.delete(entry);
}

/** Closes every browser and stops every server this process started and did not close yet; call it in after(). */
export async function closeAll() {
  const entries = [...open].reverse();
  open.clear();
  for (const e of entries) {
    await e.close().catch(() => {});
  }
}

process.on("exit", () => {
  for (const fn of cleanups) {
    try {
      fn();
    } catch {
      // best effort at exit
    }
  }
});

export function tempDir(prefix = "livesync-browser-") {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  onExit(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function freshName(prefix = "b") {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

let wasmDir;
export function buildWasm() {
  if (process.env.LIVESYNC_TEST_WASM_DIR) {
    return Promise.resolve(path.resolve(process.env.LIVESYNC_TEST_WASM_DIR));
  }
  wasmDir ??= (async () => {
    const out = tempDir("livesync-browser-wasm-");
    await execFileP("go", ["build", "-trimpath", "-ldflags=-s -w", "-o", path.join(out, "livesync.wasm"), "./wasm/"], {
      cwd: repoRoot,
      env: { ...process.env, GOOS: "js", GOARCH: "wasm" },
      maxBuffer: 16 << 20,
    });
    const { stdout: goroot } = await execFileP("go", ["env", "GOROOT"], { cwd: repoRoot });
    let execJS = path.join(goroot.trim(), "lib/wasm/wasm_exec.js");
    if (!existsSync(execJS)) {
      execJS = path.join(goroot.trim(), "misc/wasm/wasm_exec.js");
    }
    await copyFile(execJS, path.join(out, "wasm_exec.js"));
    for (const f of ["index.mjs", "index.d.ts", "package.json"]) {
      await copyFile(path.join(repoRoot, "wasm/js", f), path.join(out, f));
    }
    return out;
  })();
  return wasmDir;
}

const binaries = new Map();
export function goBuild(pkg) {
  if (!binaries.has(pkg)) {
    binaries.set(
      pkg,
      (async () => {
        const bin = path.join(tempDir("livesync-browser-bin-"), path.basename(pkg));
        await execFileP("go", ["build", "-o", bin, pkg], { cwd: repoRoot, maxBuffer: 16 << 20 });
        return bin;
      })(),
    );
  }
  return binaries.get(pkg);
}

// spawnServer starts cmd, collects its output and resolves once ready(output)
// returns a truthy value (which it resolves with), rejecting if it exits first.
function spawnServer(cmd, args, { env: extraEnv, cwd, ready, name, timeoutMs = 60000 }) {
  const child = spawn(cmd, args, { cwd, env: extraEnv, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const unregister = onExit(() => child.kill("SIGKILL"));
  let exited = false;
  const exitedP = new Promise((resolve) => child.on("exit", () => ((exited = true), resolve())));
  const untrack = track(() => stop());
  const stop = async () => {
    unregister();
    untrack();
    if (!exited) {
      child.kill("SIGKILL");
      await exitedP;
    }
  };
  const started = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    const check = (chunk) => {
      out += chunk;
      const v = ready(out);
      if (v) {
        clearTimeout(timer);
        resolve(v);
      }
    };
    child.stdout.on("data", check);
    child.stderr.on("data", check);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before it was ready:\n${out}`));
    });
  });
  return { child, stop, started, output: () => out };
}

/** Starts cmd/livesync-relay; see the API above. */
export async function startRelay({ corsOrigins = ["*"], config = "", env: extraEnv = {}, dataDir } = {}) {
  const bin = process.env.LIVESYNC_TEST_RELAY_BIN || (await goBuild("./cmd/livesync-relay"));
  const dir = tempDir("livesync-browser-relay-");
  dataDir ??= path.join(dir, "data");
  const user = "admin";
  const password = randomBytes(18).toString("hex");
  const conf = path.join(dir, "relay.toml");
  writeFileSync(conf, `cors_origins = ${JSON.stringify(corsOrigins)}\ndata_dir = ${JSON.stringify(dataDir)}\n${config}\n`);
  const p = spawnServer(bin, ["--config", conf, "--listen", "127.0.0.1:0"], {
    cwd: dir,
    env: { HOME: dir, TMPDIR: tmpdir(), PATH: process.env.PATH, LIVESYNC_RELAY_ADMIN_USER: user, LIVESYNC_RELAY_ADMIN_PASSWORD: password, ...extraEnv },
    ready: (out) => out.includes("Stop with Ctrl-C") && out.match(/listening on (http:\/\/\S+)/)?.[1],
    name: "livesync-relay",
  });
  const url = (await p.started).replace(/\/+$/, "");
  return { url, user, password, dataDir, stop: p.stop, output: p.output };
}

const versitygw = path.join(repoRoot, ".tools/versitygw");

/** false when .tools/versitygw is built, else a skip reason; under CI=true its absence throws. */
export function skipUnlessVersitygw() {
  if (existsSync(versitygw)) {
    return false;
  }
  const msg = `${versitygw} is not built (tests/s3server/start.sh builds it)`;
  if (env.ci) {
    throw new Error(`${msg}, and CI=true: the S3 browser tests need it`);
  }
  return msg;
}

/** Starts a versitygw of its own that answers CORS; see the API above. */
export async function startS3({ corsOrigin = "*" } = {}) {
  const bin = versitygw;
  if (!existsSync(bin)) {
    throw new Error(`${bin} is missing: tests/s3server/start.sh builds it (s3server_start)`);
  }
  const dir = tempDir("livesync-browser-s3-");
  mkdirSync(path.join(dir, "data"));
  const port = await freePort();
  const accessKey = `lsgo${randomBytes(8).toString("hex")}`;
  const secretKey = randomBytes(24).toString("hex");
  const region = "lsgo-local-1";
  const p = spawnServer(
    bin,
    ["--port", `127.0.0.1:${port}`, "--region", region, "--cors-allow-origin", corsOrigin, "--quiet", "posix", path.join(dir, "data")],
    { cwd: dir, env: { HOME: dir, PATH: process.env.PATH, ROOT_ACCESS_KEY: accessKey, ROOT_SECRET_KEY: secretKey }, ready: () => false, name: "versitygw" },
  );
  p.started.catch(() => {}); // readiness is probed below
  const deadline = Date.now() + 15000;
  for (;;) {
    try {
      await fetch(`http://127.0.0.1:${port}/`);
      break;
    } catch (err) {
      if (Date.now() > deadline || p.child.exitCode !== null) {
        await p.stop();
        throw new Error(`versitygw did not answer: ${err.message}\n${p.output()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const server = { endpoint: `127.0.0.1:${port}`, url: `http://127.0.0.1:${port}`, accessKey, secretKey, region, stop: p.stop };
  server.createBucket = (bucket) => createBucket(server, bucket);
  return server;
}


export { createBucket };

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
}

function closer(server) {
  let closing;
  const stop = () => {
    closing ??= new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    });
    return closing;
  };
  const unregister = onExit(() => server.closeAllConnections?.());
  const untrack = track(() => stop());
  return async () => {
    unregister();
    untrack();
    await stop();
  };
}

const corsHeaders = (req) => ({
  "access-control-allow-origin": req.headers.origin || "*",
  "access-control-allow-credentials": "true",
  "access-control-allow-methods": "GET, PUT, POST, HEAD, DELETE, OPTIONS",
  "access-control-allow-headers": req.headers["access-control-request-headers"] || "*",
  "access-control-expose-headers": "*",
  "access-control-max-age": "600",
  vary: "Origin",
});

/** An HTTP proxy to target answering CORS for any origin; see the API above. */
export async function corsProxy(target) {
  const t = new URL(target);
  const server = createServer((req, res) => {
    if (req.method === "OPTIONS" && req.headers["access-control-request-method"]) {
      res.writeHead(204, corsHeaders(req)).end();
      return;
    }
    const headers = { ...req.headers, host: t.host };
    delete headers.origin;
    delete headers.referer;
    const up = httpRequest({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers }, (r) => {
      res.writeHead(r.statusCode, { ...r.headers, ...corsHeaders(req) });
      r.pipe(res);
    });
    up.on("error", (err) => {
      if (!res.headersSent) {
        res.writeHead(502, corsHeaders(req));
      }
      res.end(String(err.message));
    });
    // The client went away (a live feed stopped): so does the upstream request.
    res.on("close", () => {
      if (!res.writableFinished) {
        up.destroy();
      }
    });
    req.pipe(up);
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, stop: closer(server) };
}

const types = {
  ".html": "text/html; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".ts": "text/plain; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/** Serves folders at URL prefixes; see the API above. */
export async function serveStatic(mounts) {
  const entries = Object.entries(mounts).sort((a, b) => b[0].length - a[0].length);
  const server = createServer(async (req, res) => {
    try {
      const p = decodeURIComponent(new URL(req.url, "http://x").pathname);
      if (p === "/favicon.ico") {
        res.writeHead(204).end();
        return;
      }
      const m = entries.find(([prefix]) => p.startsWith(prefix));
      if (!m || p.includes("..")) {
        res.writeHead(404).end();
        return;
      }
      let file = path.join(m[1], p.slice(m[0].length));
      if ((await stat(file).catch(() => null))?.isDirectory()) {
        file = path.join(file, "index.html");
      }
      const body = await readFile(file);
      res.writeHead(200, { "content-type": types[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  const port = await listen(server);
  const origin = `http://127.0.0.1:${port}`;
  return { origin, url: (p = "/") => origin + p, stop: closer(server) };
}

/** serveStatic of page/ at "/" and the built module at "/wasm/". */
export async function servePage() {
  return serveStatic({ "/": path.join(here, "page"), "/wasm/": await buildWasm() });
}

/** A headless Chromium with a fresh profile. */
export async function launchBrowser() {
  const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const unregister = onExit(() => browser.process()?.kill("SIGKILL"));
  const untrack = track(() => browser.close());
  browser.on("disconnected", () => {
    unregister();
    untrack();
  });
  return browser;
}

/** A headless Chromium over the profile folder dir, which keeps IndexedDB across launches. */
export async function launchPersistent(dir) {
  const ctx = await chromium.launchPersistentContext(dir, { executablePath: chromiumPath, headless: true, args: chromiumArgs });
  const proc = ctx.browser()?.process?.(); // a persistent context's Browser has no process()
  const unregister = onExit(() => proc?.kill("SIGKILL"));
  const untrack = track(() => ctx.close());
  ctx.on("close", () => {
    unregister();
    untrack();
  });
  return ctx;
}

/** Opens url in a new page of ctx (a Browser or BrowserContext), forwarding its console; waits for window.livesync. */
export async function newPage(ctx, url, { name = "page", quiet = !process.env.LIVESYNC_TEST_BROWSER_VERBOSE } = {}) {
  const page = await ctx.newPage();
  page.on("console", (msg) => {
    const type = msg.type();
    // Chromium logs every 4xx answer as an error; the module expects some (absent _local documents).
    const expected = /^Failed to load resource: the server responded with a status of 4\d\d/.test(msg.text());
    if (!quiet || ((type === "error" || type === "warning") && !expected)) {
      process.stderr.write(`[${name}] ${type}: ${msg.text()}\n`);
    }
  });
  page.on("pageerror", (err) => process.stderr.write(`[${name}] page error: ${err.stack || err.message}\n`));
  await page.goto(url);
  await page.waitForFunction(() => window.livesync || window.livesyncError, null, { timeout: 60000 });
  const err = await page.evaluate(() => window.livesyncError && String(window.livesyncError));
  if (err) {
    throw new Error(`the page could not load the module: ${err}`);
  }
  return page;
}

/** fetch with server's Basic credentials ({url, user, password}); path is appended to server.url. */
export function couchFetch(server, p, init = {}) {
  const auth = "Basic " + Buffer.from(`${server.user}:${server.password}`).toString("base64");
  const headers = { authorization: auth, ...(init.body ? { "content-type": "application/json" } : {}), ...init.headers };
  return fetch(server.url + p, { ...init, headers });
}
