// LiveSync's P2P mode in headless Chromium against native Go peers: the
// page runs the REAL trystero 0.25.3 (@trystero-p2p/nostr, the version the
// plugin uses) over Chromium's own WebRTC, a PouchDB 9 database and a
// LiveSync peer written for the test (p2p/rpc.mjs, p2p/livesync.mjs); the
// Go peers are adapters/p2p/trysteronet rooms with engine/livesyncrpc
// attached (p2ppeer), signalling through an in-process Nostr relay
// (adapters/p2p/nostrrelay with ForwardEphemeral) on loopback.
//
// Proven here: both sides derive the same room password from the P2P
// passphrase (octagonal-wheels' mixedHash in the page, Go's own port),
// meet and pass trystero's password handshake; the plugin's vault dumps
// (plain and end-to-end encrypted, in local form) replicate both ways
// (the page's sync: pull, then legacy/reqSync) and end identical, with
// progress acknowledged both ways; legacy/onProgress from a broadcasting
// Go peer makes the following page pull; envelopes above 15,360 bytes
// cross chunked both ways, split surrogate pairs and lone surrogates
// arriving bit for bit; a wrong room password is "incorrect room
// password" on both sides; an unaccepted peer's requests are dropped.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { launchP2PBrowser, openPeerPage, roomPassword, serveP2PPage, startGoPeers, vaultDump, waitUntil } from "./p2p/support.mjs";

let site, go, browser;
const pages = [];

before(async () => {
  [site, go, browser] = await Promise.all([serveP2PPage(), startGoPeers(), launchP2PBrowser()]);
});

after(async () => {
  for (const p of pages) {
    await p.closeAll().catch(() => {});
  }
  await browser?.close();
  await go?.stop();
  await site?.stop();
});

const fresh = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

async function startPage(name, opts) {
  const page = await openPeerPage(browser, site.url("/"), name);
  pages.push(page);
  const r = await page.evaluate((o) => window.lsp2p.start(o), { relay: go.relay, ...opts });
  return { page, selfId: r.selfId, password: r.password };
}

const pageState = (page) => page.evaluate(() => window.lsp2p.state());
// Peers usually meet within a second or two, but an offer published
// before the other side's subscription reached the relay is lost
// (ephemeral events are not stored) and trystero offers again only when
// the offer's lifetime (57 s) ends: meetings wait that long.
const meetMs = 75000;
const waitPeer = (page, name, ms = meetMs) => waitUntil(`the page to meet ${name}`, () => page.evaluate((n) => window.lsp2p.peerByName(n), name), ms);

// canon renders a document as JSON with sorted keys, for comparing
// documents from PouchDB, the Go store and the dump.
function canon(v) {
  if (Array.isArray(v)) {
    return `[${v.map(canon).join(",")}]`;
  }
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .filter((k) => k !== "_revisions")
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canon(v[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}
const byId = (docs) => new Map(docs.map((d) => [d._id, canon(d)]));

function assertSameDocs(got, want, who) {
  const g = byId(got);
  const w = byId(want);
  const missing = [...w.keys()].filter((id) => !g.has(id));
  const extra = [...g.keys()].filter((id) => !w.has(id));
  assert.deepEqual({ missing, extra }, { missing: [], extra: [] }, `${who}: documents differ`);
  for (const [id, d] of w) {
    assert.equal(g.get(id), d, `${who}: ${id} differs`);
  }
}

// The pair of the first tests: a Go peer holding the plain vault dump and
// a page holding the E2EE dump's local documents (disjoint ids), both with
// the vault passphrase of the dumps, so their getTweakSettings hashes agree.
const plain = vaultDump("vault-dump-plain.json");
const e2ee = vaultDump("vault-dump-e2ee.json");
let pair;
async function vaultPair() {
  pair ??= (async () => {
    const roomId = fresh("vault");
    const g = await go.open({ roomId, roomPassphrase: "p2p passphrase", device: "go-peer", vault: "vector-vault", passphrase: e2ee.passphrase, autoAccept: "browser-peer", tweaks: plain.tweaks, docs: plain.docs });
    const { page, selfId, password } = await startPage("vault", {
      roomId,
      passphrase: "p2p passphrase",
      device: "browser-peer",
      vault: "vector-vault",
      vaultPassphrase: e2ee.passphrase,
      tweaks: e2ee.tweaks,
      accept: ["go-peer"],
      follow: ["go-peer"],
      docs: e2ee.docs,
    });
    const goId = await waitPeer(page, "go-peer");
    assert.equal(goId, g.selfId);
    return { g, page, selfId, password, goId };
  })();
  return pair;
}

test("the page and a Go peer replicate the plugin's vault dumps both ways through trystero", { timeout: 180000 }, async (t) => {
  const t0 = Date.now();
  const { g, page, selfId, password, goId } = await vaultPair();
  t.diagnostic(`met after ${Date.now() - t0} ms (the page loaded the dump into IndexedDB first)`);
  assert.equal(password, roomPassword("p2p passphrase"), "the page's room password is not mixedHash's");
  assert.equal(roomPassword("test"), "1bhxaay1cs5qlh");

  // The Go peer sees the page's advertisement.
  const gs = await waitUntil("the Go peer to know the page", async () => {
    const s = await go.state(g.id);
    return s.known.some((a) => a.peerId === selfId) && s;
  });
  assert.deepEqual(gs.known.find((a) => a.peerId === selfId), { peerId: selfId, name: "browser-peer", platform: "browser" });
  assert.deepEqual((await pageState(page)).ads.find((a) => a.peerId === goId), { peerId: goId, name: "go-peer", platform: "server" });

  // The page's sync: pull from the Go peer, then legacy/reqSync makes the
  // Go peer pull from the page.
  const t1 = Date.now();
  const res = await page.evaluate((p) => window.lsp2p.sync(p), goId);
  t.diagnostic(`sync of ${plain.docs.length} + ${e2ee.docs.length} documents: ${Date.now() - t1} ms`);
  assert.equal(res.pulled.docs, plain.docs.length, JSON.stringify(res));
  assert.deepEqual(res.answer, { ok: true });

  const want = [...plain.docs, ...e2ee.docs];
  assertSameDocs(await page.evaluate(() => window.lsp2p.docs()), want, "the page");
  assertSameDocs(await go.docs(g.id), want, "the Go peer");

  // Progress crossed both ways: the page acknowledged its batches to the
  // Go peer (its OnProgress, sending), the Go peer acknowledged its pull
  // of the page's documents to the page.
  const st = await pageState(page);
  const acks = st.events.filter((e) => e.kind === "ack" && e.peer === goId && e.info);
  assert.ok(acks.length >= Math.ceil(e2ee.docs.length / 33), `the Go peer's acknowledgements: ${JSON.stringify(acks)}`);
  assert.ok(acks.every((a) => a.info.lastSeq <= a.info.maxSeqInBatch), JSON.stringify(acks));
  const sent = (await go.state(g.id)).progress.filter((p) => p.peer === selfId && p.sending && p.info);
  assert.ok(sent.length >= Math.ceil(plain.docs.length / 33), `the page's acknowledgements: ${JSON.stringify(sent)}`);

  // The dump's largest documents crossed chunked, both ways.
  assert.ok(st.stats.receivedStreams > 0 && st.stats.sentStreams > 0, JSON.stringify(st.stats));
  assert.ok(st.stats.largestReceived > 15360 && st.stats.largestSent > 15360, JSON.stringify(st.stats));
  assert.deepEqual(st.stats.dropped, []);
});

// text builds a string of emoji (surrogate pairs) in runs of varying
// length separated by one ASCII letter, so that chunk boundaries fall
// inside pairs; lone adds lone surrogates. It returns the UTF-16 code
// units: a page and Node build the same string from them.
function textUnits(n, lone) {
  const s = [];
  let run = 1;
  while (s.length < n) {
    for (let i = 0; i < run; i++) {
      s.push(0xd83d, 0xde00 + (i % 64));
    }
    s.push(0x61 + (run % 26));
    run = (run * 7 + 3) % 997;
    if (lone && s.length % 5 === 0) {
      s.push(0xd800 + (run % 1024)); // a high surrogate alone
      s.push(0x7a);
      s.push(0xdc00 + (run % 1024)); // a low surrogate alone
    }
  }
  return s;
}
const fromUnits = (u) => {
  let s = "";
  for (let i = 0; i < u.length; i += 4096) {
    s += String.fromCharCode(...u.slice(i, i + 4096));
  }
  return s;
};

test("onProgress makes the page pull; envelopes above 15,360 bytes cross chunked with split surrogate pairs, bit for bit, both ways", { timeout: 150000 }, async () => {
  const { g, page, selfId, goId } = await vaultPair();
  const before = (await pageState(page)).stats;

  // Go → page: a broadcasting Go peer tells the page (which follows it)
  // about a new document; the page pulls it.
  await go.broadcast(g.id);
  const down = textUnits(60000, true);
  const r = await go.put(g.id, [{ _id: "h:surrogates-down", type: "leaf", data: fromUnits(down) }]);
  assert.ok(r[0]?.Rev && !r[0].Error, JSON.stringify(r));
  const got = await waitUntil(
    "the page to pull the Go peer's document after onProgress",
    () =>
      page.evaluate(async (units) => {
        const d = await window.lsp2p.get("h:surrogates-down");
        if (!d) {
          return null;
        }
        const s = d.data;
        let first = -1;
        for (let i = 0; i < Math.max(s.length, units.length); i++) {
          if (s.charCodeAt(i) !== units[i]) {
            first = i;
            break;
          }
        }
        return { length: s.length, first };
      }, down),
    30000,
  );
  assert.deepEqual(got, { length: down.length, first: -1 }, "the page's copy differs from the Go peer's");
  const st = await pageState(page);
  assert.ok(st.events.some((e) => e.kind === "onProgress" && e.peer === goId && e.following), "no legacy/onProgress from the Go peer");
  assert.ok(st.stats.receivedSplitPairs > before.receivedSplitPairs, `no received chunk ended inside a surrogate pair: ${JSON.stringify(st.stats)}`);

  // page → Go: the page's document reaches the Go peer (its sync: a pull
  // of the page, then legacy/reqSync, which the page serves by pulling),
  // chunked with pairs split at part boundaries.
  const up = textUnits(60000, true).map((u, i) => (i % 1000 === 999 && u === 0x61 ? 0x62 : u));
  await page.evaluate((units) => {
    let s = "";
    for (let i = 0; i < units.length; i += 4096) {
      s += String.fromCharCode(...units.slice(i, i + 4096));
    }
    return window.lsp2p.put([{ _id: "h:surrogates-up", type: "leaf", data: s }]);
  }, up);
  const pulled = await go.sync(g.id, selfId);
  assert.ok(!pulled.error && pulled.Docs >= 1, JSON.stringify(pulled));
  assert.ok((await pageState(page)).events.some((e) => e.kind === "reqSync" && e.peer === goId), "the page served no legacy/reqSync");
  const doc = (await go.docs(g.id)).find((d) => d._id === "h:surrogates-up");
  assert.ok(doc, "the Go peer has no h:surrogates-up");
  assert.equal(doc.data.length, up.length);
  assert.ok(doc.data === fromUnits(up), "the Go peer's copy differs from the page's");
  const after = (await pageState(page)).stats;
  assert.ok(after.sentSplitPairs > before.sentSplitPairs, `no sent chunk ended inside a surrogate pair: ${JSON.stringify(after)}`);
});

test("a wrong room password is an incorrect room password on both sides", { timeout: 150000 }, async () => {
  const roomId = fresh("wrongpw");
  const page = await openPeerPage(browser, site.url("/"), "wrongpw");
  pages.push(page);
  const pageId = await page.evaluate(() => window.lsp2p.state().selfId);
  // The peer whose id sorts first offers, and the other side is the one
  // that cannot open the sealed offer: one Go peer on each side of the
  // page's id makes each side the one that fails.
  const common = { roomId, roomPassphrase: "the right one", device: "go-peer", vault: "v", autoAccept: "browser-peer" };
  const low = await go.open({ ...common, selfIdBelow: pageId });
  const high = await go.open({ ...common, selfIdAbove: pageId });
  await page.evaluate((o) => window.lsp2p.start(o), { relay: go.relay, roomId, passphrase: "a wrong one", device: "browser-peer", vault: "v", accept: ["go-peer"] });

  const pageErrors = await waitUntil(
    "trystero's join error in the page",
    async () => {
      const s = await pageState(page);
      return s.joinErrors.length > 0 && s.joinErrors;
    },
    meetMs,
  );
  assert.match(pageErrors[0].error, /incorrect room password/);
  assert.equal(pageErrors[0].peerId, low.selfId);
  const goErrors = await waitUntil(
    "the Go peer's join error",
    async () => {
      const s = await go.state(high.id);
      return s.joinErrors.length > 0 && s.joinErrors;
    },
    meetMs,
  );
  assert.match(goErrors[0], /incorrect room password/);
  // Nobody got in.
  assert.deepEqual((await pageState(page)).active, []);
  assert.ok(!(await go.state(low.id)).peers.includes(pageId));
  assert.ok(!(await go.state(high.id)).peers.includes(pageId));
  await go.close(low.id);
  await go.close(high.id);
});

test("an unaccepted peer's requests are dropped, both ways; !reqAuth answers false", { timeout: 150000 }, async (t) => {
  const t0 = Date.now();
  const roomId = fresh("refused");
  const g = await go.open({ roomId, roomPassphrase: "p", device: "go-peer", vault: "v", autoAccept: "someone-else", docs: plain.docs.slice(0, 3) });
  const { page, selfId } = await startPage("refused", { roomId, passphrase: "p", device: "browser-peer", vault: "v", accept: ["someone-else"] });
  const goId = await waitPeer(page, "go-peer");
  await waitUntil("the Go peer to know the page", async () => (await go.state(g.id)).known.some((a) => a.peerId === selfId));
  t.diagnostic(`met after ${Date.now() - t0} ms`);

  // The page asks: only legacy/!reqAuth is answered (false); db.info is
  // dropped and times out; the page's pull is refused. The Go peer asks
  // the page, which does not accept it either, at the same time.
  const pageAsks = page.evaluate(async (p) => {
    const [info, auth, pullErr] = await Promise.all([
      window.lsp2p.call(p, "db.info", [], 1500),
      window.lsp2p.call(p, "legacy/!reqAuth", ["x"], 5000),
      window.lsp2p.pull(p).then(
        () => null,
        (e) => String(e.message),
      ),
    ]);
    return { info, auth, pullErr };
  }, goId);
  const [asked, call, pulled] = await Promise.all([pageAsks, go.call(g.id, selfId, "db.info", [], 1500), go.pull(g.id, selfId)]);
  assert.equal(asked.info.code, "TIMEOUT", JSON.stringify(asked.info));
  assert.deepEqual(asked.auth, { data: false });
  assert.match(asked.pullErr, /rejected/);
  assert.equal(call.code, "TIMEOUT", JSON.stringify(call));
  assert.equal(pulled.kind, "rejected", JSON.stringify(pulled));
  assert.ok((await pageState(page)).stats.dropped.some((d) => d.endsWith("refused db.info")));
  // Nothing crossed.
  assert.equal((await page.evaluate(() => window.lsp2p.docs())).length, 0);
  await go.close(g.id);
});
