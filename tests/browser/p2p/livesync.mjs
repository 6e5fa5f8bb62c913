// A LiveSync P2P peer for the Chromium interop test: a page holding its
// own PouchDB (like LiveSync's WebPeer) that serves it over an RpcRoom
// and replicates from other peers. Written for the test from the
// protocol's description (commonlib src/replication/trystero/
// TrysteroReplicatorP2PServer.ts, TrysteroReplicator.ts and
// src/pouchdb/ReplicatorShim.ts are the upstream originals).
//
// Served: db.info, db.changes, db.revsDiff, db.bulkGet, db.get, db.put,
// db.bulkDocs over the PouchDB; legacy/!reqAuth, legacy/getTweakSettings
// (with the three-minute passphrase hash), legacy/reqSync, legacy/onProgress,
// legacy/onProgressAcknowledged, legacy/getIsBroadcasting. Every request
// but legacy/!reqAuth needs an accepted caller: one whose advertisement
// names a device in the accept list; the others are dropped unanswered.
// Client: pull (the mark document on the source, a local checkpoint,
// pages of 33 changes, revsDiff locally, db.bulkGet, bulkDocs with
// new_edits:false) and sync (pull, then legacy/reqSync).
import { sha1 } from "octagonal-wheels/hash/purejs";
import { RpcRoom, RpcError } from "./rpc.mjs";

export const PASSPHRASE_BUCKET_MS = 180000;
const BATCH = 33;

/** sha1b64(sha1b64(base36(floor(now/3 min))) + passphrase), octagonal-wheels' sha1 being base64 of SHA-1. */
export async function passphraseHash(passphrase, now = Date.now()) {
  const bucket = Math.floor(now / PASSPHRASE_BUCKET_MS).toString(36);
  return sha1((await sha1(bucket)) + passphrase);
}

const isNotFound = (err) => err?.name === "not_found" || err?.message === "missing" || err?.reason === "missing" || err?.message === "not_found" || err?.details?.name === "not_found";

export class LiveSyncPeer {
  /**
   * room: a joined Trystero room; db: a PouchDB named <vault>-livesync-v2;
   * accept, follow: device names (case-insensitive).
   */
  constructor({ room, selfId, db, device, passphrase = "", tweaks = {}, accept = [], follow = [], maxWirePayloadBytes }) {
    this.room = room;
    this.selfId = selfId;
    this.db = db;
    this.device = device;
    this.passphrase = passphrase;
    this.tweaks = tweaks;
    this.accept = new Set(accept.map((n) => n.toLowerCase()));
    this.follow = new Set(follow.map((n) => n.toLowerCase()));
    this.ads = new Map();
    this.active = new Set();
    this.events = []; // {kind, peer, ...} in order
    const rpcAction = room.makeAction("rpc2");
    this.rpc = new RpcRoom({ action: rpcAction, maxWirePayloadBytes, canAccept: (peer, method) => method === "legacy/!reqAuth" || this.isAccepted(peer) });
    this.adAction = room.makeAction("ad");
    this.adAction.onMessage = (ad, { peerId }) => {
      // Kept only when it names its sender, and never our own.
      if (ad && typeof ad === "object" && ad.peerId === peerId && peerId !== selfId && typeof ad.name === "string") {
        this.ads.set(peerId, { peerId, name: ad.name, platform: String(ad.platform ?? "") });
        this.events.push({ kind: "ad", peer: peerId, name: ad.name, platform: ad.platform });
      }
    };
    room.onPeerJoin = (peer) => {
      this.active.add(peer);
      this.events.push({ kind: "join", peer });
      this.rpc.peerJoined(peer);
      this.adAction.send({ peerId: selfId, name: device, platform: "browser" }, { target: peer }).catch(() => {});
    };
    room.onPeerLeave = (peer) => {
      this.active.delete(peer);
      this.ads.delete(peer);
      this.events.push({ kind: "leave", peer });
      this.rpc.peerLeft(peer);
    };
    this.serve();
  }

  isAccepted(peer) {
    const ad = this.ads.get(peer);
    return !!ad && this.accept.has(ad.name.toLowerCase());
  }

  /** The getTweakSettings answer: the must-match tweaks and the passphrase's current hash. */
  async tweakSettings() {
    return { ...this.tweaks, passphrase: await passphraseHash(this.passphrase) };
  }

  serve() {
    const db = this.db;
    const h = (m, fn) => this.rpc.handle(m, fn);
    h("db.info", () => db.info());
    h("db.changes", (_, [opts = {}]) => {
      // An empty since is the start (replicateShim's first checkpoint).
      const since = opts.since === "" || opts.since == null ? 0 : opts.since;
      return db.changes({ since, style: opts.style ?? "all_docs", limit: opts.limit, include_docs: false });
    });
    h("db.revsDiff", (_, [diff]) => db.revsDiff(diff));
    h("db.bulkGet", (_, [opts]) => db.bulkGet(opts));
    h("db.get", (_, [id, opts]) => db.get(id, opts ?? {}));
    h("db.put", (_, [doc, opts]) => db.put(doc, opts ?? {}));
    h("db.bulkDocs", (_, [docs, opts]) => db.bulkDocs(docs, opts ?? {}));
    h("legacy/!reqAuth", (peer) => this.isAccepted(peer));
    h("legacy/getTweakSettings", () => this.tweakSettings());
    h("legacy/reqSync", async (peer) => {
      this.events.push({ kind: "reqSync", peer });
      try {
        await this.pull(peer);
        return { ok: true };
      } catch (err) {
        return { error: String(err?.message ?? err) };
      }
    });
    h("legacy/onProgress", async (peer) => {
      const ad = this.ads.get(peer);
      const following = !!ad && this.follow.has(ad.name.toLowerCase());
      this.events.push({ kind: "onProgress", peer, following });
      if (following) {
        await this.pull(peer).catch((err) => this.events.push({ kind: "pullError", peer, error: String(err?.message ?? err) }));
      }
      return true;
    });
    h("legacy/onProgressAcknowledged", (peer, [, info]) => {
      this.events.push({ kind: "ack", peer, info: info ?? null });
      return true;
    });
    h("legacy/getIsBroadcasting", () => false);
  }

  /** The peer's database as replicateShim's source: every call crosses the room. */
  remote(peer) {
    const c = (method, args, timeout) => this.rpc.call(peer, method, args, timeout);
    return {
      info: () => c("db.info", []),
      changes: (opts) => c("db.changes", [opts]),
      bulkGet: (opts) => c("db.bulkGet", [opts], 40000),
      get: (id) => c("db.get", [id]),
      put: (doc) => c("db.put", [doc, {}]),
    };
  }

  /** Replicates from peer into the local PouchDB; resolves to {mark, since, batches, docs}. */
  async pull(peer, { rewind = false } = {}) {
    const ok = await this.rpc.call(peer, "legacy/!reqAuth", [this.selfId], 20000);
    if (ok !== true) {
      throw new Error(`peer ${peer} rejected us`);
    }
    const theirs = await this.rpc.call(peer, "legacy/getTweakSettings", [this.selfId], 5000);
    const mine = await this.tweakSettings();
    if (theirs?.passphrase !== mine.passphrase) {
      throw new Error("the peer's passphrase differs");
    }
    const src = this.remote(peer);
    const dst = this.db;
    const [dstInfo, srcInfo] = await Promise.all([dst.info(), src.info()]);
    const maxSeq = parseInt(String(srcInfo.update_seq).split("-")[0], 10);
    const markId = `_local/replication-checkpoint-mark-${dstInfo.db_name}-${srcInfo.db_name}`;
    let markDoc;
    try {
      markDoc = await src.get(markId);
    } catch (err) {
      if (!isNotFound(err)) {
        throw err;
      }
      markDoc = { _id: markId };
    }
    if (rewind || markDoc.mark === undefined) {
      markDoc = { ...markDoc, mark: String(Date.now()) };
      await src.put(markDoc);
    }
    const mark = markDoc.mark;
    const cpId = `_local/replication-checkpoint-${dstInfo.db_name}-${mark}`;
    const cp = await dst.get(cpId).catch((err) => (isNotFound(err) ? { _id: cpId, since: "" } : Promise.reject(err)));
    let since = cp.since ?? "";
    let batches = 0;
    let written = 0;
    for (;;) {
      const page = await src.changes({ since, style: "all_docs", limit: BATCH });
      if (!page.results.length) {
        break;
      }
      const want = {};
      for (const ch of page.results) {
        want[ch.id] = [...(want[ch.id] ?? []), ...ch.changes.map((x) => x.rev)];
      }
      const diff = await dst.revsDiff(want);
      const missing = Object.entries(diff).flatMap(([id, d]) => (d.missing ?? []).map((rev) => ({ id, rev })));
      if (missing.length) {
        const got = await src.bulkGet({ docs: missing, revs: true });
        const docs = got.results.flatMap((r) => r.docs).filter((d) => d.ok).map((d) => d.ok);
        await dst.bulkDocs(docs, { new_edits: false });
        batches++;
        written += docs.length;
        const info = { lastSeq: parseInt(String(page.last_seq).split("-")[0], 10), maxSeqInBatch: maxSeq };
        this.events.push({ kind: "pulled", peer, docs: docs.length, info });
        this.rpc.call(peer, "legacy/onProgressAcknowledged", [this.selfId, info], 500).catch(() => {});
      }
      since = page.last_seq;
      const cur = await dst.get(cpId).catch(() => ({ _id: cpId }));
      await dst.put({ ...cur, since });
    }
    // The end of the pull: an acknowledgement without progress.
    this.rpc.call(peer, "legacy/onProgressAcknowledged", [this.selfId, undefined], 500).catch(() => {});
    return { mark, since, batches, docs: written };
  }

  /** Pull from peer, then ask it to pull from us. */
  async sync(peer) {
    const pulled = await this.pull(peer);
    const answer = await this.rpc.call(peer, "legacy/reqSync", [this.selfId], 0);
    if (answer?.error) {
      throw new Error(`the peer could not pull from us: ${answer.error}`);
    }
    return { pulled, answer };
  }
}

export { RpcError };
