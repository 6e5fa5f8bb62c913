// The page of the browser tests: loads the wasm module through its loader
// and keeps, for the tests (which drive it with page.evaluate):
//   window.livesync           the API (load()'s result); window.livesyncError if loading failed
//   window.requests           every request the module made through host.fetch: {method, url}
//   window.hostFetch          the counting fetch passed as host.fetch; while
//                             window.stalled is true its requests hang (until aborted)
//   window.stallAfter         {match, count}: the network goes quiet (stalled) at the
//                             first request past count whose URL contains match
//   window.vaults[name]       vaults opened with openVault
//   window.events[name]       their "file" and "status" events (held and released are file events), {topic, ...event}
//   window.openVault(name, options) opens a vault (host.fetch is hostFetch) and records its events
//   window.errorOf(promise)   resolves with {code, stage, message} of the rejection, or null
import { load } from "/wasm/index.mjs";

window.requests = [];
window.stalled = false;
window.hostFetch = (url, init = {}) => {
  window.requests.push({ method: init.method ?? "GET", url: String(url) });
  const after = window.stallAfter;
  if (after && String(url).includes(after.match) && ++after.seen > after.count) {
    window.stalled = true;
  }
  if (window.stalled) {
    // The network went quiet: the request hangs until it is aborted.
    return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(init.signal.reason)));
  }
  return fetch(url, init);
};
window.vaults = {};
window.events = {};
window.openVault = async (name, options) => {
  const v = await window.livesync.open({ ...options, host: { fetch: window.hostFetch } });
  window.vaults[name] = v;
  const log = (window.events[name] = []);
  // "held" and "released" are file events too: "file" and "status" see every event once.
  for (const topic of ["file", "status"]) {
    v.on(topic, (e) => log.push({ topic, ...e, error: e.error ? { ...e.error } : undefined }));
  }
  return true;
};
window.errorOf = async (promise) => {
  try {
    await promise;
    return null;
  } catch (err) {
    return { code: err.code, stage: err.stage, message: String(err.message) };
  }
};

try {
  window.livesync = await load({ wasm: new URL("/wasm/livesync.wasm", location.href) });
} catch (err) {
  window.livesyncError = err?.stack || String(err);
}
