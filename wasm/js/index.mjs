// The loader of livesync.wasm: instantiates the module with Go's
// wasm_exec.js (next to this file) and returns its API.
//
//   import { load } from "./index.mjs";
//   const livesync = await load();            // or load({ wasm: bytesOrURL })
//   const vault = await livesync.open({ settings, passphrase, remote, host: { fetch } });
//
// Every method of a vault returns a Promise, except on(), which returns
// a function that stops the listener. Errors are Error objects with
// code, stage and docId.
const isNode = typeof process === "object" && !!process.versions?.node;

// wasm_exec.js needs the Web Crypto global, which Node before 19 only
// has as node:crypto's webcrypto.
async function loadGoRuntime() {
  if (isNode && !globalThis.crypto) {
    globalThis.crypto = (await import("node:crypto")).webcrypto;
  }
  if (!globalThis.Go) {
    await import("./wasm_exec.js");
  }
}

async function wasmSource(wasm) {
  if (wasm instanceof WebAssembly.Module || wasm instanceof ArrayBuffer || ArrayBuffer.isView(wasm)) {
    return wasm;
  }
  const url = wasm ?? new URL("./livesync.wasm", import.meta.url);
  if (isNode && (typeof url === "string" ? !/^https?:/.test(url) : url.protocol === "file:")) {
    const { readFile } = await import("node:fs/promises");
    return readFile(url);
  }
  return fetch(url);
}

async function instantiate(src, imports) {
  if (src instanceof WebAssembly.Module) {
    return WebAssembly.instantiate(src, imports);
  }
  if (typeof Response === "function" && src instanceof Response) {
    if (WebAssembly.instantiateStreaming && src.headers.get("content-type") === "application/wasm") {
      return (await WebAssembly.instantiateStreaming(src, imports)).instance;
    }
    src = await src.arrayBuffer();
  }
  return (await WebAssembly.instantiate(src, imports)).instance;
}

// wrapOn makes on() throw the Error the module returns for wrong
// arguments (a Go function cannot throw).
function wrapOn(obj) {
  const on = obj.on;
  obj.on = (topic, fn) => {
    const off = on(topic, fn);
    if (off instanceof Error) {
      throw off;
    }
    return off;
  };
  return obj;
}

// wrapVault wraps the vault's on() and that of the P2P peers it joins
// (a module built without P2P has no p2p method).
function wrapVault(vault) {
  const p2p = vault.p2p;
  if (p2p) {
    vault.p2p = async (opts) => wrapOn(await p2p(opts));
  }
  return wrapOn(vault);
}

/**
 * Loads the module and returns its API: { open(options), codes }.
 * options.wasm: a URL, bytes, or a compiled WebAssembly.Module (default:
 * livesync.wasm next to this file).
 */
export async function load(options = {}) {
  await loadGoRuntime();
  const go = new globalThis.Go();
  const name = `__livesyncRegister_${Math.random().toString(36).slice(2)}`;
  const registered = new Promise((resolve) => {
    globalThis[name] = resolve;
  });
  go.argv = ["livesync.wasm", name];
  try {
    const instance = await instantiate(await wasmSource(options.wasm), go.importObject);
    const run = go.run(instance);
    const exited = run.then(() => {
      throw new Error("livesync.wasm exited before it registered its API");
    });
    const api = await Promise.race([registered, exited]);
    const open = api.open;
    return {
      codes: api.codes,
      webCrypto: api.webCrypto,
      open: async (opts) => wrapVault(await open(opts)),
      deleteStorage: (name) => api.deleteStorage(name),
      // exit closes every vault and ends the module. Go's runtime may
      // leave an idle timer behind (it keeps Node running until it
      // fires): it is cleared once the module has ended.
      exit: async () => {
        api.exit();
        await run;
        for (const t of go._scheduledTimeouts?.values() ?? []) {
          clearTimeout(t);
        }
        go._scheduledTimeouts?.clear();
      },
    };
  } finally {
    delete globalThis[name];
  }
}
