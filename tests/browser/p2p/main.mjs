// The page of the Chromium P2P interop test (bundled by p2p/support.mjs
// with esbuild): the real trystero 0.25.3 (@trystero-p2p/nostr), a
// PouchDB 9 database (pouchdb-browser, IndexedDB) and the LiveSync peer of
// livesync.mjs. The test drives it through window.lsp2p:
//   start(opts)        joins the room: {roomId, passphrase (P2P, the room
//                      password is derived here with mixedHash as LiveSync
//                      does) or password, relay, device, vault, vaultPassphrase,
//                      tweaks, accept, follow, docs, maxWirePayloadBytes}
//                      → {selfId, password}
//   state()            {selfId, active, ads, events, joinErrors, stats}
//   peerByName(name)   the id of the advertised peer of that device name, or null
//   pull(peer), sync(peer)
//   call(peer, method, args, timeoutMs) → {data} or {code, message}
//   get(id)            one document, or null
//   docs()             every live document (winning revision), by id
//   put(docs)          local edits (new_edits: true)
import { joinRoom, selfId } from "@trystero-p2p/nostr";
import { mixedHash } from "octagonal-wheels/hash/purejs";
import PouchDB from "pouchdb-browser";
import { LiveSyncPeer } from "./livesync.mjs";

let peer;
let db;
const joinErrors = [];

/** LiveSync's room password: base36 of both halves of mixedHash(passphrase, 0). */
export function roomPassword(passphrase) {
  const [m, f] = mixedHash(passphrase, 0);
  return m.toString(36) + f.toString(36);
}

async function start(o) {
  db = new PouchDB(`${o.vault}-livesync-v2`, { auto_compaction: false, revs_limit: 100 });
  if (o.docs?.length) {
    const res = await db.bulkDocs(o.docs, { new_edits: false });
    const bad = res.filter((r) => r.error);
    if (bad.length) {
      throw new Error(`loading the documents: ${JSON.stringify(bad.slice(0, 3))}`);
    }
  }
  const password = o.password ?? roomPassword(o.passphrase);
  const room = joinRoom(
    {
      appId: o.appId ?? "self-hosted-livesync",
      password,
      relayConfig: { urls: [o.relay], manualReconnection: true },
      rtcConfig: { iceServers: [] }, // loopback: host candidates only
    },
    o.roomId,
    { onJoinError: (e) => joinErrors.push({ error: e.error, peerId: e.peerId }), handshakeTimeoutMs: 30000 },
  );
  peer = new LiveSyncPeer({
    room,
    selfId,
    db,
    device: o.device,
    passphrase: o.vaultPassphrase ?? "",
    tweaks: o.tweaks ?? {},
    accept: o.accept ?? [],
    follow: o.follow ?? [],
    maxWirePayloadBytes: o.maxWirePayloadBytes,
  });
  window.lsp2p.peer = peer;
  return { selfId, password };
}

const wrapError = (err) => ({ code: err?.code ?? "ERROR", message: String(err?.message ?? err) });

window.lsp2p = {
  start,
  roomPassword,
  state: () => ({
    selfId,
    active: [...(peer?.active ?? [])],
    ads: [...(peer?.ads.values() ?? [])],
    events: peer?.events ?? [],
    joinErrors,
    stats: peer?.rpc.stats,
  }),
  peerByName: (name) => [...(peer?.ads.values() ?? [])].find((a) => a.name.toLowerCase() === name.toLowerCase() && peer.active.has(a.peerId))?.peerId ?? null,
  pull: (p) => peer.pull(p),
  sync: (p) => peer.sync(p),
  call: (p, method, args, timeoutMs) => peer.rpc.call(p, method, args, timeoutMs).then((data) => ({ data }), wrapError),
  get: (id) => db.get(id).catch(() => null),
  docs: async () => (await db.allDocs({ include_docs: true })).rows.map((r) => r.doc),
  put: (docs) => db.bulkDocs(docs),
};
window.lsp2pReady = true;
