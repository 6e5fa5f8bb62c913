// gen-vectors.mjs computes engine/trystero/testdata/vectors.json with the
// code of the npm packages the LiveSync plugin's P2P mode runs: trystero
// 0.25.3 (@trystero-p2p/core and @trystero-p2p/nostr, the same version
// commonlib pins) and octagonal-wheels' mixedHash (what commonlib's
// src/rpc/transports/trysteroUtils.ts uses for the room password).
//
// Every value comes from the packages' own functions. Functions that the
// packages do not export are reached by importing their dist modules by
// path (node_modules/@trystero-p2p/core/dist/*.mjs); nothing is
// re-implemented here except the deterministic test bodies (see bodyFor),
// whose SHA-256 is recorded so that the Go side proves it built the same
// bytes.
//
// Randomness is replaced before the packages load: Math.random by a seeded
// xorshift and crypto.getRandomValues by a SHA-256 counter stream, and
// Date.now is fixed, so regenerating gives the same file byte for byte.
// trystero draws its selfId, offer ids, handshake challenges, SDP IVs and
// the Nostr key from these, so they are fixed too; the vectors record
// them where the Go side needs them (the IV of each sealed SDP, the
// challenge of each handshake).
//
// Regenerate: cd tests/trystero && npm ci && node gen-vectors.mjs
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outFile = join(here, "..", "..", "engine", "trystero", "testdata", "vectors.json");

// ---- deterministic randomness (before any package is loaded) ----
let rngState = 0x9e3779b9;
Math.random = () => {
	rngState ^= rngState << 13;
	rngState >>>= 0;
	rngState ^= rngState >>> 17;
	rngState ^= rngState << 5;
	rngState >>>= 0;
	return rngState / 2 ** 32;
};
let randCounter = 0;
Object.defineProperty(globalThis.crypto, "getRandomValues", {
	configurable: true,
	writable: true,
	value: (arr) => {
		const bytes = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
		let off = 0;
		while (off < bytes.length) {
			const block = createHash("sha256").update(`trystero-vectors:${randCounter++}`).digest();
			const n = Math.min(block.length, bytes.length - off);
			bytes.set(block.subarray(0, n), off);
			off += n;
		}
		return arr;
	},
});
const fixedNow = Date.UTC(2026, 11, 2, 9, 0, 0);
Date.now = () => fixedNow;

const nm = join(here, "node_modules");
const core = (f) => import(join(nm, "@trystero-p2p", "core", "dist", f));
const pkgVersion = (p) => JSON.parse(readFileSync(join(nm, p, "package.json"), "utf8")).version;

const utils = await core("utils.mjs");
const cryptoMod = await core("crypto.mjs");
const handshakeMod = await core("handshake.mjs");
const actionsMod = await core("actions.mjs");
const sharedPeerMod = await core("shared-peer.mjs");
const signalMod = await core("signal-handler.mjs");
const nostr = await import("@trystero-p2p/nostr");
const { mixedHash } = await import("octagonal-wheels/hash/purejs");

const { genId, selfId, topicPath, libName, toHex, encodeBytes, decodeBytes, toJson } = utils;
const { sha1, genKey, encrypt, decrypt, deriveRoomNamespace, hashWith } = cryptoMod;

const hex = (u8) => Buffer.from(u8).toString("hex");
const sha256hex = (u8) => createHash("sha256").update(u8).digest("hex");
const check = (cond, msg) => {
	if (!cond) throw new Error(`self-check failed: ${msg}`);
};

// ---- room password (commonlib trysteroUtils.ts generateJoinRoomOptions) ----
const passphrases = [
	"test",
	"",
	"a",
	"correct horse battery staple",
	"パスワード",
	"pässwörd-ÄÖÜß",
	"🔑🗝️secret",
	"x".repeat(1000),
	"長い合言葉".repeat(200) + "🙂",
];
const roomPasswords = passphrases.map((passphrase) => {
	const [m, f] = mixedHash(passphrase, 0);
	return {
		passphrase,
		murmur: m,
		fnv1a: f,
		password: m.toString(36) + f.toString(36),
	};
});
check(roomPasswords[0].password === "1bhxaay1cs5qlh", "test -> 1bhxaay1cs5qlh");

// ---- sha1b36 ----
const sha1Inputs = ["", "Trystero@self-hosted-livesync@room", "日本語", "emoji 😀", "a".repeat(5000)];
const sha1b36 = [];
for (const input of sha1Inputs) sha1b36.push({ input, output: await sha1(input) });

// ---- topics, kinds, room tokens ----
const topicCases = [
	["self-hosted-livesync", "my-vault-group", "0123456789AaBbCcDdEe"],
	["self-hosted-livesync", "Group ID with spaces", "zZyYxXwWvVuUtTsSrRqQ"],
	["self-hosted-livesync", "グループ", "a1B2c3D4e5F6g7H8i9J0"],
	["self-hosted-livesync", "🏠 home vault", "ZzZzZzZzZzZzZzZzZzZz"],
	["custom-app", "room@with@ats", "00000000000000000000"],
	["アプリ", "Ünïcödé-räum", selfId],
];
const topics = [];
for (const [appId, roomId, peerId] of topicCases) {
	const rootPlain = topicPath(libName, appId, roomId);
	const rootTopic = await sha1(rootPlain);
	const selfTopic = await sha1(topicPath(rootPlain, peerId));
	const rootEvent = JSON.parse(await nostr.createEvent(rootTopic, "x"))[1];
	const selfEvent = JSON.parse(await nostr.createEvent(selfTopic, "x"))[1];
	topics.push({
		appId,
		roomId,
		selfId: peerId,
		rootTopicPlain: rootPlain,
		rootTopic,
		selfTopic,
		rootKind: rootEvent.kind,
		selfKind: selfEvent.kind,
		roomToken: await deriveRoomNamespace(appId, roomId),
	});
}

// ---- ids (genId's alphabet and lengths) ----
const savedRandom = Math.random;
let k = 0;
Math.random = () => (k++ + 0.5) / 62;
const alphabet = genId(62);
Math.random = savedRandom;
const ids = {
	alphabet,
	selfId,
	selfIdLength: selfId.length,
	offerIdLength: 12, // signal-handler.mjs offerIdSize; checked below from a real offer
	challengeLength: 36, // handshake.mjs genId(36); checked below from a real challenge
};

// ---- SDP sealing (crypto.mjs encrypt/decrypt with genKey) ----
const sdpOffer =
	"v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\na=extmap-allow-mixed\r\na=msid-semantic: WMS\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:Ab3d\r\na=ice-pwd:0123456789abcdefghijklmn\r\na=ice-options:trickle\r\na=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\na=setup:actpass\r\na=mid:0\r\na=sctp-port:5000\r\na=max-message-size:262144\r\n";
const candidate = JSON.stringify({
	candidate: "candidate:842163049 1 udp 1677729535 192.0.2.1 56143 typ srflx raddr 0.0.0.0 rport 0 generation 0 ufrag Ab3d network-cost 999",
	sdpMid: "0",
	sdpMLineIndex: 0,
	usernameFragment: "Ab3d",
});
const sdpCases = [
	["1bhxaay1cs5qlh", "self-hosted-livesync", "my-vault-group", sdpOffer],
	["1bhxaay1cs5qlh", "self-hosted-livesync", "my-vault-group", candidate],
	["", "self-hosted-livesync", "グループ", "plain ascii"],
	[roomPasswords[4].password, "アプリ", "🏠 home vault", "日本語のSDP 😀"],
	["1bhxaay1cs5qlh", "self-hosted-livesync", "my-vault-group", ""],
];
const sdp = [];
for (const [password, appId, roomId, plain] of sdpCases) {
	const key = genKey(password, appId, roomId);
	const keyRaw = await hashWith("SHA-256", `${password}:${appId}:${roomId}`);
	const sealed = await encrypt(key, plain);
	check((await decrypt(key, sealed)) === plain, "decrypt(encrypt(x)) == x");
	const ivDecimal = sealed.split("$")[0];
	sdp.push({
		password,
		appId,
		roomId,
		keyHex: hex(keyRaw),
		ivHex: hex(Uint8Array.from(ivDecimal.split(",").map(Number))),
		plain,
		sealed,
	});
}
// A sealed string that a wrong password must fail to open.
{
	const key = genKey("wrong-password", "self-hosted-livesync", "my-vault-group");
	let failed = false;
	try {
		await decrypt(key, sdp[0].sealed);
	} catch {
		failed = true;
	}
	check(failed, "a wrong key fails to decrypt");
}

// How trystero's decrypt reads a sealed string it did not write itself:
// the IV list goes through Number() and a Uint8Array, the ciphertext
// through atob, and only the first two "$" parts count.
const sdpOpenVariants = { password: sdp[2].password, appId: sdp[2].appId, roomId: sdp[2].roomId, variants: [] };
{
	const base = sdp[2];
	const key = genKey(base.password, base.appId, base.roomId);
	const [ivText, ct] = base.sealed.split("$");
	const ivs = ivText.split(",");
	const withFirstIV = (x) => [x, ...ivs.slice(1)].join(",") + "$" + ct;
	const variants = [
		["as sealed", base.sealed],
		["IV byte as hex literal", withFirstIV("0x" + Number(ivs[0]).toString(16))],
		["IV byte with spaces", withFirstIV(` ${ivs[0]}\t`)],
		["IV byte as a float", withFirstIV(`${ivs[0]}.75`)],
		["IV byte plus 256", withFirstIV(String(Number(ivs[0]) + 256))],
		["IV byte minus 256", withFirstIV(String(Number(ivs[0]) - 256))],
		["IV byte in exponent form", withFirstIV(`${ivs[0]}e0`)],
		["IV byte empty", withFirstIV("")],
		["IV byte not a number", withFirstIV("abc")],
		["IV byte Infinity", withFirstIV("Infinity")],
		["IV with a trailing comma", ivText + ",$" + ct],
		["IV with one byte less", ivs.slice(1).join(",") + "$" + ct],
		["ciphertext without padding", ivText + "$" + ct.replace(/=+$/, "")],
		["ciphertext with whitespace", ivText + "$" + ct.slice(0, 4) + " \n" + ct.slice(4)],
		["a third part", base.sealed + "$ignored"],
		["ciphertext truncated", ivText + "$" + ct.slice(0, -4)],
		["ciphertext with a non-base64 letter", ivText + "$" + ct.slice(0, -2) + "*="],
		["no dollar", ivText],
		["empty", ""],
		["bit flipped", ivText + "$" + (ct[0] === "A" ? "B" : "A") + ct.slice(1)],
	];
	for (const [name, sealed] of variants) {
		let plain = null;
		try {
			plain = await decrypt(key, sealed);
		} catch {
			plain = null;
		}
		sdpOpenVariants.variants.push({ name, sealed, opens: plain !== null, ...(plain !== null ? { plain } : {}) });
	}
}

// ---- password handshake on @_hsdata (handshake.mjs createPasswordHandshake) ----
const handshakeCases = [
	["self-hosted-livesync", "my-vault-group", "1bhxaay1cs5qlh", "0123456789AaBbCcDdEeFfGgHhIiJjKkLlMm"],
	["self-hosted-livesync", "グループ", roomPasswords[6].password, "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"],
	["アプリ", "🏠 home vault", "p", "not-a-genId-challenge: any string"],
];
const handshakes = [];
for (const [appId, roomId, password, challenge] of handshakeCases) {
	const { run } = handshakeMod.createPasswordHandshake(password, appId, roomId);
	const sent = [];
	await run(
		async (data) => sent.push(data),
		async () => ({ data: { __trystero_pw: "challenge", c: challenge } }),
		false,
	);
	check(sent.length === 1, "responder sends one message");
	handshakes.push({
		appId,
		roomId,
		password,
		challenge,
		responseJSON: toJson(sent[0]),
		responseHash: sent[0].h,
	});
}
// The initiator's side: the challenge message, its acceptance of the right
// response and its error on a wrong one.
const initiator = {};
{
	const { run } = handshakeMod.createPasswordHandshake("1bhxaay1cs5qlh", "self-hosted-livesync", "my-vault-group");
	const sent = [];
	const respond = async (pw) => {
		const c = sent[sent.length - 1].c;
		return { data: { __trystero_pw: "response", h: toHex(await hashWith("SHA-256", `${c}:${pw}:self-hosted-livesync:my-vault-group`)) } };
	};
	await run(async (d) => sent.push(d), () => respond("1bhxaay1cs5qlh"), true);
	initiator.appId = "self-hosted-livesync";
	initiator.roomId = "my-vault-group";
	initiator.password = "1bhxaay1cs5qlh";
	initiator.challengeJSON = toJson(sent[0]);
	check(sent[0].c.length === ids.challengeLength, "challenge length");
	let err = null;
	try {
		await run(async (d) => sent.push(d), () => respond("wrong"), true);
	} catch (e) {
		err = e.message;
	}
	check(err !== null, "wrong response rejected");
	initiator.wrongResponseError = err;
}

// ---- data-channel frames: room and presence (shared-peer.mjs) ----
const fakeUnderlying = () => {
	const p = {
		sent: [],
		handlers: {},
		created: 0,
		isDead: false,
		connection: { connectionState: "connected", iceConnectionState: "connected" },
		channel: { readyState: "open", bufferedAmount: 0, bufferedAmountLowThreshold: 0 },
		setHandlers(h) {
			Object.assign(p.handlers, h);
		},
		sendData(d) {
			p.sent.push(new Uint8Array(d));
		},
		destroy() {
			p.isDead = true;
		},
		removeStream() {},
		removeTrack() {},
	};
	return p;
};
const framesAppId = "self-hosted-livesync";
const framesRoomId = "my-vault-group";
const framesPeerId = "zZzZzZzZzZzZzZzZzZzZ";
const spm = new sharedPeerMod.SharedPeerManager();
const underlying = fakeUnderlying();
const shared = spm.register(framesAppId, framesPeerId, underlying, 1e9);
const token = await deriveRoomNamespace(framesAppId, framesRoomId);
const { proxy } = spm.bind(framesRoomId, Promise.resolve(token), shared, { onDetach() {} });
await Promise.resolve();
await new Promise((r) => setTimeout(r, 0));

spm.sendRoomPresence(shared, token, true);
spm.sendRoomPresence(shared, token, false);
const presence = underlying.sent.splice(0).map((f, i) => ({ present: i === 0, roomToken: token, hex: hex(f) }));
proxy.sendData(Uint8Array.from([0xde, 0xad, 0xbe, 0xef]));
const roomFrameExample = { roomToken: token, payloadHex: "deadbeef", hex: hex(underlying.sent.splice(0)[0]) };

// How the receiving side reads frames (SharedPeerManager.dispatchData).
const seenPresence = [];
spm.setRoomPresenceHandler(framesAppId, (peerId, roomToken, isPresent) => seenPresence.push({ roomToken, isPresent }));
const roomData = [];
proxy.setHandlers({ data: (d) => roomData.push(new Uint8Array(d)) });
const parseCases = [
	["room frame for the bound token", roomFrameExample.hex],
	["presence true", presence[0].hex],
	["presence false", presence[1].hex],
	["presence byte 5 counts as absent", "0205" + presence[0].hex.slice(4)],
	["room frame for another token", hex(concat([1, 0, 3], encodeBytes("abc"), [9, 9]))],
	["room frame with an empty payload", hex(concat([1, 0, 3], encodeBytes("xyz")))],
	["too short", "0100"],
	["zero token length", "010000ff"],
	["token longer than the frame", "01000a616263"],
	["presence too short", "020100"],
	["presence zero token length", "02010000"],
	["unknown version 3", "03000161"],
	["unknown version 0", "00000161"],
	["empty", ""],
];
const frameParsing = [];
for (const [name, h] of parseCases) {
	seenPresence.length = 0;
	roomData.length = 0;
	shared.pendingDataByToken.clear();
	underlying.handlers.data(Uint8Array.from(Buffer.from(h, "hex")).buffer);
	let result = null;
	if (seenPresence.length) result = { type: "presence", roomToken: seenPresence[0].roomToken, isPresent: seenPresence[0].isPresent };
	else if (roomData.length) result = { type: "room", roomToken: token, payloadHex: hex(roomData[0]) };
	else if (shared.pendingDataByToken.size) {
		const [[t, list]] = [...shared.pendingDataByToken.entries()];
		result = { type: "room", roomToken: t, payloadHex: hex(new Uint8Array(list[0])) };
	}
	frameParsing.push({ name, hex: h, result });
}
function concat(...parts) {
	const arrs = parts.map((p) => Uint8Array.from(p));
	const out = new Uint8Array(arrs.reduce((a, c) => a + c.length, 0));
	let o = 0;
	for (const a of arrs) {
		out.set(a, o);
		o += a.length;
	}
	return out;
}

// ---- action frames (actions.mjs createActionManager -> action-wire.mjs) ----
// The sender's peer is the SharedPeerManager proxy above, so each captured
// frame is exactly what goes onto the data channel (room frame + action).
const sender = actionsMod.createActionManager({
	getPeer: () => proxy,
	getPeerIds: () => [framesPeerId],
	canReceiveFromPeer: () => true,
});
const received = [];
const receiver = actionsMod.createActionManager({
	getPeer: () => undefined,
	getPeerIds: () => [],
	canReceiveFromPeer: () => true,
});

const cycle = ["a", "é", "€", "😀"];
// textOf is the documented body generator: whole characters of the
// repeating "aé€😀" cycle while they fit in n UTF-8 bytes, then "a"s.
function textOf(n) {
	let s = "";
	let bytes = 0;
	for (let i = 0; ; i++) {
		const c = cycle[i % cycle.length];
		const b = encodeBytes(c).length;
		if (bytes + b > n) break;
		s += c;
		bytes += b;
	}
	return s + "a".repeat(n - bytes);
}
function binaryOf(n) {
	return Uint8Array.from({ length: n }, (_, i) => (i * 31 + 7) & 0xff);
}
function bodyFor(kind, n) {
	if (kind === "binary") return { data: binaryOf(n), gen: "binary" };
	if (kind === "text") return { data: textOf(n), gen: "text" };
	if (n === 1) return { data: 7, gen: "json-number-7" };
	return { data: { s: textOf(n - 8) }, gen: "json-object-s" };
}

const actionName = "rpc2";
const rawSend = sender.makeInternalAction(actionName);
const recv = receiver.makeInternalAction(actionName);
recv.onMessage((payload, peerId, metadata) => received.push({ payload, metadata }));
const actionFrames = [];
let nonce = 0;
const sizes = [0, 1, 8, 16347, 16348, 16349, 32696, 32697, 40000];
for (const kind of ["binary", "text", "json"]) {
	for (const n of sizes) {
		if (kind === "json" && n === 0) continue; // no JSON value serialises to 0 bytes
		if (kind === "json" && n > 1 && n < 8) continue;
		const { data, gen } = bodyFor(kind, n);
		const body = kind === "binary" ? data : encodeBytes(kind === "text" ? data : toJson(data));
		check(body.length === n, `body size ${kind} ${n}`);
		const meta = kind === "json" && n === 16348 ? { m: "meta" } : undefined;
		await rawSend.send(data, framesPeerId, meta);
		const frames = underlying.sent.splice(0);
		const vec = {
			action: actionName,
			nonce,
			kind,
			generator: gen,
			bodyLength: n,
			bodySHA256: sha256hex(body),
			...(meta ? { metadataJSON: toJson(meta) } : {}),
			frames: frames.map((f) => describeFrame(f)),
		};
		nonce++;
		// The receiving action manager reassembles the same value.
		for (const f of frames) receiver.handleData(framesPeerId, f.slice(3 + token.length).buffer);
		const got = received.splice(0);
		check(got.length === 1, `one message reassembled (${kind} ${n})`);
		const gotBytes = kind === "binary" ? got[0].payload : encodeBytes(kind === "text" ? got[0].payload : toJson(got[0].payload));
		check(sha256hex(gotBytes) === vec.bodySHA256, `reassembled body (${kind} ${n})`);
		actionFrames.push(vec);
	}
}
function describeFrame(f) {
	const off = 3 + token.length;
	const action = f.subarray(off);
	const out = {
		frameLength: f.length,
		headerHex: hex(action.subarray(0, 36)),
		bodyLength: action.length - 36,
		frameSHA256: sha256hex(f),
	};
	if (f.length <= 256) out.hex = hex(f);
	return out;
}

// Lone surrogates (an rpc2 chunk may end inside a surrogate pair): a JSON
// body carries them as \udXXX escapes (JSON.stringify), a string body as
// U+FFFD (TextEncoder).
const loneSurrogates = [];
{
	const act = sender.makeInternalAction("lone");
	const cases = [
		["json", { wire: "chunk", streamId: "stream-1", index: 0, total: 2, payload: "ab\ud83d" }],
		["json", { wire: "chunk", streamId: "stream-1", index: 1, total: 2, payload: "\ude00cd" }],
		["text", "ab\ud83d"],
		["text", "\ude00cd"],
	];
	for (const [kind, data] of cases) {
		await act.send(data, framesPeerId);
		const [f] = underlying.sent.splice(0);
		const body = f.subarray(3 + token.length + 36);
		loneSurrogates.push({ kind, frameHex: hex(f), bodyText: decodeBytes(body) });
	}
}

// Nonces are per action and wrap from 65535 to 0.
const wrapAction = sender.makeInternalAction("@_ping");
const nonceWrap = [];
for (let i = 0; i <= 65537; i++) {
	await wrapAction.send("", framesPeerId);
	const f = underlying.sent.splice(0)[0];
	if (i === 0 || i >= 65535) nonceWrap.push({ sendIndex: i, headerHex: describeFrame(f).headerHex });
}

// Interleaved messages: the receiver (action-wire.mjs handleData) keeps
// one pending message per (peer, action, nonce) and delivers each when its
// last frame arrives.
const reassembly = await reassemblyVectors();
async function reassemblyVectors() {
	const a = sender.makeInternalAction("ilv");
	const b = sender.makeInternalAction("ilv2");
	const messages = [
		{ action: "ilv", nonce: 0, kind: "json", generator: "json-object-s", bodyLength: 40000, metadataJSON: toJson({ r: "req-1" }) },
		{ action: "ilv", nonce: 1, kind: "binary", generator: "binary", bodyLength: 20000 },
		{ action: "ilv2", nonce: 0, kind: "text", generator: "text", bodyLength: 16349 },
	];
	const framesOf = [];
	for (const m of messages) {
		const { data } = bodyFor(m.kind, m.bodyLength);
		await (m.action === "ilv" ? a : b).send(data, framesPeerId, m.metadataJSON ? JSON.parse(m.metadataJSON) : undefined);
		framesOf.push(underlying.sent.splice(0).map((f) => f.slice(3 + token.length)));
	}
	// [message, frame] in arrival order: the three messages interleaved.
	const order = [[0, 0], [1, 0], [2, 0], [0, 1], [2, 1], [1, 1], [0, 2], [0, 3]];
	check(order.length === framesOf.flat().length, "every frame is delivered once");
	const r = actionsMod.createActionManager({ getPeer: () => undefined, getPeerIds: () => [], canReceiveFromPeer: () => true });
	const delivered = [];
	for (const name of ["ilv", "ilv2"]) {
		r.makeInternalAction(name).onMessage((payload, peerId, metadata) => {
			const kind = payload instanceof Uint8Array ? "binary" : typeof payload === "string" ? "text" : "json";
			const bytes = kind === "binary" ? payload : encodeBytes(kind === "text" ? payload : toJson(payload));
			const i = messages.findIndex((m) => m.action === name && m.kind === kind && m.bodyLength === bytes.length);
			check(i >= 0, "delivered message is one sent");
			check(sha256hex(bytes) === sha256hex(bytesOf(messages[i])), "delivered body is the one sent");
			check((metadata === undefined ? undefined : toJson(metadata)) === messages[i].metadataJSON, "metadata delivered");
			delivered.push({ message: i, afterArrival: -1 });
		});
	}
	const arrivals = [];
	for (let i = 0; i < order.length; i++) {
		const [m, f] = order[i];
		const frame = framesOf[m][f];
		const before = delivered.length;
		r.handleData(framesPeerId, frame.buffer);
		for (let j = before; j < delivered.length; j++) delivered[j].afterArrival = i;
		arrivals.push({ message: m, frame: f, headerHex: hex(frame.subarray(0, 36)), frameSHA256: sha256hex(frame) });
	}
	for (const m of messages) m.bodySHA256 = sha256hex(bytesOf(m));
	return { messages, arrivals, delivered };
}
function bytesOf(m) {
	const { data } = bodyFor(m.kind, m.bodyLength);
	return m.kind === "binary" ? data : encodeBytes(m.kind === "text" ? data : toJson(data));
}

// How trystero's receiver (action-wire.mjs handleData) treats frames a
// well-behaved sender never produces. The frames are built here by hand;
// what happens to them is trystero's.
const receiverEdgeCases = await receiverEdgeVectors();
async function receiverEdgeVectors() {
	const frame = (name, nonce, flags, progress, body) => {
		const nameBytes = encodeBytes(name);
		const b = typeof body === "string" ? encodeBytes(body) : Uint8Array.from(body);
		const f = new Uint8Array(36 + b.length);
		f.set(nameBytes.subarray(0, 32));
		f.set([nonce >> 8, nonce & 255, flags, progress], 32);
		f.set(b, 36);
		return f;
	};
	const scenarios = [
		["invalid JSON body, then the same nonce again", [frame("e", 0, 9, 255, "{"), frame("e", 0, 9, 255, '{"ok":1}')]],
		["invalid metadata, then the body", [frame("e", 1, 10, 128, "{"), frame("e", 1, 9, 255, "[1]")]],
		["metadata, then a two-frame string", [frame("e", 2, 2, 85, '{"m":1}'), frame("e", 2, 0, 170, "ab"), frame("e", 2, 1, 255, "cd")]],
		["a frame shorter than the header, then the last frame", [Uint8Array.from([0x65, 0, 0]), frame("e", 0, 1, 255, "xy")]],
		["NULs inside the name", [frame("e\0\0x", 3, 1, 255, "n")]],
		["flags of the last frame decide: binary earlier, string last", [frame("e", 4, 4, 128, [0xc3]), frame("e", 4, 1, 255, [0xa9])]],
		["binary and JSON flags together", [frame("e", 5, 13, 255, [1, 2, 3])]],
		["a string body with a byte order mark and an invalid byte", [frame("e", 6, 1, 255, [0xef, 0xbb, 0xbf, 0x61, 0xff, 0x62])]],
		["an empty frame", [new Uint8Array(0), frame("", 0, 1, 255, "q")]],
	];
	const out = [];
	for (const [name, frames] of scenarios) {
		const r = actionsMod.createActionManager({ getPeer: () => undefined, getPeerIds: () => [], canReceiveFromPeer: () => true });
		const delivered = [];
		let current = -1;
		for (const action of ["e", "ex", ""]) {
			try {
				r.makeInternalAction(action).onMessage((payload, peerId, metadata) => {
					const kind = payload instanceof Uint8Array ? "binary" : typeof payload === "string" ? "text" : "json";
					delivered.push({
						afterFrame: current,
						action,
						kind,
						bodyText: kind === "binary" ? undefined : kind === "text" ? payload : toJson(payload),
						bodyHex: kind === "binary" ? hex(payload) : undefined,
						...(metadata === undefined ? {} : { metadataJSON: toJson(metadata) }),
					});
				});
			} catch (e) {
				// "" is not a valid action name to register; frames for it stay queued.
			}
		}
		const threw = [];
		for (let i = 0; i < frames.length; i++) {
			current = i;
			try {
				r.handleData("peer", frames[i].slice().buffer);
				threw.push(false);
			} catch {
				threw.push(true);
			}
			await Promise.resolve();
		}
		out.push({ name, frames: frames.map((f) => hex(f)), threw, delivered });
	}
	return out;
}

// How the receiver decodes text (utils.mjs decodeBytes, a TextDecoder):
// action names, room tokens, string and JSON bodies, opened SDP.
const textDecoding = [
	"", "616263", "efbbbf616263", "c3", "c3a9", "e282", "e282ac", "f09f98", "f09f9880", "ff", "c0af", "eda080",
	"f4908080", "e0808061", "f08f8080", "61c362", "e2ac", "80bf", "efbfbd", "f09f98e282ac",
].map((h) => ({ hex: h, text: decodeBytes(Uint8Array.from(Buffer.from(h, "hex"))) }));

// Which of two peers leads (sends the offer and the handshake challenge):
// trystero compares the selfIds with JavaScript's < (signal-handler.mjs
// shouldLeadOffer, handshake.mjs isInitiator).
const leaderPairs = [
	["0123456789AaBbCcDdEe", "0123456789AaBbCcDdEf"],
	["Zzzzzzzzzzzzzzzzzzzz", "aaaaaaaaaaaaaaaaaaaa"],
	["zzzzzzzzzzzzzzzzzzzz", "ZZZZZZZZZZZZZZZZZZZZ"],
	["9zzzzzzzzzzzzzzzzzzz", "A0000000000000000000"],
	["abc", "abcd"],
	[selfId, selfId],
].map(([self, other]) => ({ self, other, selfLeads: self < other }));

// ---- signalling messages (signal-handler.mjs createSignalHandler) ----
const signalling = await signallingVectors();
async function signallingVectors() {
	const appId = "self-hosted-livesync";
	const roomId = "my-vault-group";
	const password = "1bhxaay1cs5qlh";
	const rootPlain = topicPath(libName, appId, roomId);
	const rootTopicP = sha1(rootPlain);
	const selfTopicP = sha1(topicPath(rootPlain, selfId));
	const key = genKey(password, appId, roomId);
	const withKey = (f, kk) => async (s) => ({ type: s.type, sdp: await f(kk, s.sdp) });
	const published = [];
	const joinErrors = [];
	const offerPeers = [];
	const fakeRTCPeer = () => {
		const p = fakeUnderlying();
		p.signal = async (s) => {
			p.signalled = s;
			if (s.type === "offer") {
				p.handlers.signal?.({ type: "answer", sdp: "answer-sdp-plain" });
				p.handlers.signal?.({ type: "candidate", sdp: candidate });
			}
		};
		p.getOffer = async () => ({ type: "offer", sdp: "offer-sdp-plain" });
		return p;
	};
	const makeCtx = (k) => ({
		appId,
		roomId,
		config: {},
		peerStates: {},
		rootTopicPlaintext: rootPlain,
		rootTopicP,
		selfTopicP,
		toPlain: withKey(decrypt, k),
		toCipher: withKey(encrypt, k),
		isLeaving: () => false,
		isPassive: false,
		isActive: true,
		onJoinError: (e) => joinErrors.push(e),
		sharedPeers: { get: () => undefined, getHealth: () => "live", clear() {} },
		offerPool: {
			checkout: async () => {
				const peer = fakeRTCPeer();
				offerPeers.push(peer);
				return [{ peer, offer: await encrypt(k, "offer-sdp-plain") }];
			},
			recycle() {},
		},
		encryptOffer: async () => "",
		initPeer: () => fakeRTCPeer(),
		connectPeer() {},
		disconnectPeer() {},
		attachSharedPeerToRoom() {},
		checkDeactivate() {},
		announceIntervals: [5333],
		announceIntervalMs: 5333,
	});
	const signalPeer = (topic, msg) => published.push({ topic, content: msg });
	const rootTopic = await rootTopicP;
	const selfTopic = await selfTopicP;
	const higher = "zzzzzzzzzzzzzzzzzzzz"; // sorts after any selfId: we lead
	const lower = "00000000000000000000"; // sorts before: it leads
	const out = { appId, roomId, password, selfId, rootTopic, selfTopic, plains: { offer: "offer-sdp-plain", answer: "answer-sdp-plain", candidate }, messages: [] };
	const record = async (name, from, inTopic, msg, role) => {
		const h = signalMod.createSignalHandler(makeCtx(key))(0);
		published.length = 0;
		offerPeers.length = 0;
		await h(inTopic, msg, signalPeer);
		await new Promise((r) => setTimeout(r, 0));
		// An offering peer trickles an ICE candidate after its offer went out.
		for (const p of offerPeers) p.handlers.signal?.({ type: "candidate", sdp: candidate });
		await new Promise((r) => setTimeout(r, 0));
		await new Promise((r) => setTimeout(r, 0));
		out.messages.push({
			name,
			received: { topic: inTopic, content: msg },
			role,
			sent: published.map((p) => ({ ...p, toSelfTopicOf: from })),
		});
	};
	// An announcement from a peer with a higher id: we send it an offer.
	await record("announce from a higher id: we offer", higher, rootTopic, toJson({ peerId: higher }), "offerer");
	// An announcement from a lower id: we nudge it with a bare peerId on its self topic.
	await record("announce from a lower id: we nudge", lower, rootTopic, toJson({ peerId: lower }), "nudger");
	// An offer from a lower id on our self topic: we answer on its self topic.
	const offerFromLower = toJson({ peerId: lower, offerId: "OfFeRiD01234", offer: await encrypt(key, "offer-sdp-plain") });
	await record("offer from a lower id: we answer", lower, selfTopic, offerFromLower, "answerer");
	// The same offer sealed with another password: "incorrect room password".
	joinErrors.length = 0;
	const wrongKey = genKey("wrong", appId, roomId);
	const badOffer = toJson({ peerId: lower, offerId: "OfFeRiD01234", offer: await encrypt(wrongKey, "offer-sdp-plain") });
	await record("offer sealed with another password", lower, selfTopic, badOffer, "answerer");
	out.wrongPasswordError = joinErrors.map((e) => e.error);
	// Every message went to the self topic of the peer it answers.
	for (const m of out.messages) {
		for (const s of m.sent) {
			const peerSelfTopic = await sha1(topicPath(rootPlain, s.toSelfTopicOf));
			check(s.topic === peerSelfTopic, "signals go to the peer's self topic");
		}
	}
	const offerMsg = JSON.parse(out.messages[0].sent[0].content);
	check(offerMsg.offerId.length === ids.offerIdLength, "offer id length");
	// Which announcement-shaped messages the handler acts on (it answers an
	// announcement from a higher id with an offer) and which it drops.
	out.decoding = [];
	const hi = JSON.stringify(higher);
	for (const content of [
		`{"peerId":${hi}}`,
		`{"peerId":${hi},"extra":1,"passive":false}`,
		`{"peerId":${hi},"offerId":5}`,
		`{"peerId":${hi},"offer":123}`,
		`{"peerId":${hi},"offer":""}`,
		`{"peerId":${hi},"candidate":null}`,
		`{"peerId":${hi},"answer":""}`,
		`{"peerId":""}`,
		`{"peerId":5}`,
		`{}`,
		`[${hi}]`,
		`null`,
		`"${higher}"`,
		`not json`,
		` {"peerId":${hi}} `,
	]) {
		const h = signalMod.createSignalHandler(makeCtx(key))(0);
		published.length = 0;
		await h(rootTopic, content, signalPeer);
		await new Promise((r) => setTimeout(r, 0));
		await new Promise((r) => setTimeout(r, 0));
		out.decoding.push({ content, actedOn: published.length > 0 });
	}
	return out;
}

// ---- Nostr events (nostr index.mjs createEvent / subscribe) ----
const nostrEvents = [];
for (const t of topics.slice(0, 3)) {
	const content = toJson({ peerId: t.selfId });
	const raw = await nostr.createEvent(t.rootTopic, content);
	nostrEvents.push({ topic: t.rootTopic, content, raw, message: JSON.parse(raw) });
}
const nostrSubscribe = nostr.subscribe("0".repeat(64), topics[0].rootTopic);

// ---- room transcripts (room.mjs driven over a fake data channel) ----
// Two real trystero rooms (room.mjs, with the password handshake that
// strategy.mjs composes) joined through two SharedPeerManagers whose fake
// peers hand each frame to the other side. Both rooms live in this process
// and so share one selfId; each is told a remote id that gives it its role:
// room A sees its peer as "zzzz…" (A < it: A initiates the handshake), room
// B sees its peer as "0000…" (B responds).
const roomModule = (await core("room.mjs")).default;
const transcripts = [];
transcripts.push(await transcript("same password", "1bhxaay1cs5qlh", "1bhxaay1cs5qlh"));
transcripts.push(await transcript("responder has another password", "1bhxaay1cs5qlh", roomPasswords[2].password));
async function transcript(name, passwordA, passwordB) {
	const appId = "self-hosted-livesync";
	const roomId = "my-vault-group";
	const idSeenByA = "zzzzzzzzzzzzzzzzzzzz";
	const idSeenByB = "00000000000000000000";
	const log = [];
	const events = [];
	const underA = fakeUnderlying();
	const underB = fakeUnderlying();
	const pending = [];
	underA.sendData = (d) => pending.push(["A->B", new Uint8Array(d)]);
	underB.sendData = (d) => pending.push(["B->A", new Uint8Array(d)]);
	// pump delivers frames until nothing has moved for 30 ms (WebCrypto
	// hashing in the handshake is asynchronous).
	const pump = async () => {
		for (let stable = 0, last = -1; stable < 15; ) {
			await new Promise((r) => setTimeout(r, 2));
			stable = log.length === last && !pending.length ? stable + 1 : 0;
			last = log.length;
			while (pending.length) {
				const [dir, d] = pending.shift();
				log.push({ dir, frameLength: d.length, hex: hex(d) });
				(dir === "A->B" ? underB : underA).handlers.data?.(d.slice().buffer);
			}
		}
	};
	const tokenP = deriveRoomNamespace(appId, roomId);
	const spmA = new sharedPeerMod.SharedPeerManager();
	const spmB = new sharedPeerMod.SharedPeerManager();
	const proxyA = spmA.bind(roomId, tokenP, spmA.register(appId, idSeenByA, underA, 1e9), { onDetach() {} }).proxy;
	const proxyB = spmB.bind(roomId, tokenP, spmB.register(appId, idSeenByB, underB, 1e9), { onDetach() {} }).proxy;
	const mkRoom = (label, password) => {
		let onPeer = null;
		const room = roomModule(
			(f) => (onPeer = f),
			(id) => events.push(`${label}: peer left`),
			() => {},
			{
				onPeerHandshake: handshakeMod.createPasswordHandshake(password, appId, roomId).compose(undefined),
				handshakeTimeoutMs: 30000,
				onHandshakeError: (id, error) => events.push(`${label}: handshake error: ${error}`),
			},
		);
		room.onPeerJoin = () => events.push(`${label}: peer joined`);
		return { room, connect: (proxy, id) => onPeer(proxy, id) };
	};
	const A = mkRoom("A", passwordA);
	const B = mkRoom("B", passwordB);
	const rpcB = B.room.makeAction("rpc2");
	const gotB = [];
	rpcB.onMessage = (data, ctx) => gotB.push(data);
	A.connect(proxyA, idSeenByA);
	B.connect(proxyB, idSeenByB);
	await pump();
	const handshakeFrames = log.length;
	const rpcMessage = { wire: "raw", payload: toJson({ kind: "handshake", versionMajor: 1, versionMinor: 0 }) };
	if (events.includes("A: peer joined") && events.includes("B: peer joined")) {
		await A.room.makeAction("rpc2").send(rpcMessage, { target: idSeenByA });
		await pump();
		check(gotB.length === 1 && toJson(gotB[0]) === toJson(rpcMessage), "B received A's rpc2 message");
		// A pings B (B answers with @_pong), then leaves the room (@_leave).
		const ping = A.room.ping(idSeenByA);
		await pump();
		await ping;
		const leaving = A.room.leave();
		await pump();
		await leaving;
		await pump();
	}
	return {
		name,
		appId,
		roomId,
		passwordA,
		passwordB,
		roles: { A: "initiator (its selfId sorts before the id it sees)", B: "responder" },
		handshakeFrames,
		frames: log,
		events,
		...(gotB.length ? { rpcMessageJSON: toJson(rpcMessage) } : {}),
	};
}

// ---- constants (read from the dist source text) ----
// Timings and sizes that no exported function reveals. The script reads
// every top-level `const name = <number>;` of the dist modules, and the
// warm-up list.
const constants = {};
for (const [pkg, file] of [
	["core", "action-wire.mjs"], ["core", "actions.mjs"], ["core", "offer-pool.mjs"], ["core", "peer.mjs"],
	["core", "room.mjs"], ["core", "signal-handler.mjs"], ["core", "strategy.mjs"], ["nostr", "index.mjs"],
]) {
	const src = readFileSync(join(nm, "@trystero-p2p", pkg, "dist", file), "utf8");
	for (const m of src.matchAll(/^const (\w+) = ([0-9.e]+);$/gm)) constants[`${pkg}/${file}:${m[1]}`] = Number(m[2]);
	if (file === "strategy.mjs") {
		const w = src.match(/const announceWarmupIntervalsMs = \[([^\]]*)\]/);
		constants[`${pkg}/${file}:announceWarmupIntervalsMs`] = w[1].split(",").map((x) => Number(x.trim()));
	}
	if (file === "room.mjs") {
		check(/setTimeout\(res, 99\)/.test(src), "leave delay literal");
		constants[`${pkg}/${file}:leaveDelayMs (literal in leave)`] = 99;
	}
}
check(constants["core/offer-pool.mjs:offerTtl"] === (await core("offer-pool.mjs")).offerTtl, "offerTtl read = exported");

// ---- a whole joinRoom over a fake relay (runs last: it takes over the timers) ----
// @trystero-p2p/nostr joinRoom, as LiveSync calls it, with a fake WebSocket
// relay and a fake RTCPeerConnection, on a virtual clock: the REQ it sends,
// its announcements and their times, the ICE servers it configures, and
// the offer it publishes when a peer with a higher id announces itself.
const joinRoomRun = await joinRoomVectors();
async function joinRoomVectors() {
	const realSetTimeout = setTimeout;
	const vt = { now: 0, q: [], id: 1 };
	const schedule = (fn, ms, args, every) => {
		const id = vt.id++;
		const d = Math.max(0, Number(ms) || 0);
		vt.q.push({ id, at: vt.now + d, fn, args, every: every ? Math.max(1, d) : 0 });
		return id;
	};
	const cancel = (id) => (vt.q = vt.q.filter((e) => e.id !== id));
	globalThis.setTimeout = (fn, ms, ...args) => schedule(fn, ms, args, false);
	globalThis.setInterval = (fn, ms, ...args) => schedule(fn, ms, args, true);
	globalThis.clearTimeout = cancel;
	globalThis.clearInterval = cancel;
	// settle lets pending asynchronous work (WebCrypto digests, Schnorr
	// signing) finish: it waits until neither the timer queue nor the
	// relay's messages have changed for 30 ms of real time.
	const settle = async () => {
		let stable = 0;
		let last = "";
		while (stable < 15) {
			await new Promise((r) => realSetTimeout(r, 2));
			const now = `${vt.q.length}/${vt.id}/${sent.length}`;
			stable = now === last ? stable + 1 : 0;
			last = now;
		}
	};
	const advance = async (until) => {
		await settle();
		for (;;) {
			vt.q.sort((a, b) => a.at - b.at || a.id - b.id);
			const e = vt.q[0];
			if (!e || e.at > until) break;
			if (e.every) e.at += e.every;
			else vt.q.shift();
			vt.now = e.at;
			e.fn(...e.args);
			await settle();
		}
		vt.now = until;
	};

	const sent = [];
	const sockets = [];
	globalThis.WebSocket = class {
		constructor(url) {
			this.url = url;
			this.readyState = 0;
			sockets.push(this);
			setTimeout(() => {
				this.readyState = 1;
				this.onopen?.();
			}, 0);
		}
		send(d) {
			sent.push({ atMs: vt.now, raw: String(d) });
		}
		close() {}
	};
	const pcConfigs = [];
	const labels = [];
	let sdpN = 0;
	class FakePC extends EventTarget {
		constructor(cfg) {
			super();
			pcConfigs.push(cfg);
			this.connectionState = "new";
			this.iceConnectionState = "new";
			this.iceGatheringState = "complete";
			this.signalingState = "stable";
			this.localDescription = null;
			this.remoteDescription = null;
		}
		createDataChannel(label, options) {
			labels.push(options === undefined ? label : `${label} ${toJson(options)}`);
			return { label, readyState: "connecting", bufferedAmount: 0, addEventListener() {}, removeEventListener() {} };
		}
		async createOffer() {
			return { type: "offer", sdp: `v=0 fake offer ${++sdpN}` };
		}
		async setLocalDescription(d) {
			this.localDescription = d && d.type ? d : { type: this.remoteDescription ? "answer" : "offer", sdp: `v=0 fake sdp ${++sdpN}` };
		}
		async setRemoteDescription(d) {
			this.remoteDescription = d;
		}
		async addIceCandidate() {}
		getSenders() {
			return [];
		}
		close() {
			this.connectionState = "closed";
		}
	}

	const appId = "self-hosted-livesync";
	const roomId = "my-vault-group";
	const password = "1bhxaay1cs5qlh";
	const relay = "wss://relay.invalid";
	// As commonlib's generateJoinRoomOptions builds it for a TURN server
	// and the "relay" connection path.
	const config = {
		appId,
		password,
		relayConfig: { manualReconnection: true, urls: [relay] },
		rtcPolyfill: FakePC,
		turnConfig: [{ urls: ["turn:turn.invalid:3478"], username: "user", credential: "secret" }],
		rtcConfig: { iceTransportPolicy: "relay" },
	};
	nostr.joinRoom(config, roomId, { handshakeTimeoutMs: 30000 });
	await advance(20000);
	const rootTopic = await sha1(topicPath(libName, appId, roomId));
	const selfTopic = await sha1(topicPath(topicPath(libName, appId, roomId), selfId));
	// A peer with a higher id announces itself on the root topic.
	const other = "zzzzzzzzzzzzzzzzzzzz";
	const req = JSON.parse(sent.find((m) => m.raw.startsWith('["REQ"')).raw);
	const announceAt = vt.now;
	sockets[0].onmessage({ data: toJson(["EVENT", req[1], { kind: req[2].kinds[0], tags: [["x", rootTopic]], content: toJson({ peerId: other }) }]) });
	await advance(vt.now + 100);
	const otherSelfTopic = await sha1(topicPath(topicPath(libName, appId, roomId), other));
	const names = { [rootTopic]: "root", [selfTopic]: "self", [otherSelfTopic]: "other's self" };
	const events = [];
	let offerPlain;
	for (const m of sent) {
		const msg = JSON.parse(m.raw);
		if (msg[0] !== "EVENT") {
			events.push({ atMs: m.atMs, raw: m.raw });
			continue;
		}
		const topic = msg[1].tags[0][1];
		events.push({ atMs: m.atMs, topic: names[topic] ?? topic, raw: m.raw });
		const offer = JSON.parse(msg[1].content).offer;
		if (offer) offerPlain = await decrypt(genKey(password, appId, roomId), offer);
	}
	return {
		appId,
		roomId,
		password,
		selfId,
		rootTopic,
		selfTopic,
		otherPeerId: other,
		otherAnnouncedAtMs: announceAt,
		offerPlain,
		turnConfig: config.turnConfig,
		rtcConfig: config.rtcConfig,
		rtcConfiguration: pcConfigs[0],
		peerConnections: pcConfigs.length,
		dataChannelLabels: [...new Set(labels)],
		sent: events,
	};
}

// ---- output ----
const vectors = {
	provenance: {
		generator: "tests/trystero/gen-vectors.mjs",
		packages: {
			trystero: pkgVersion("trystero"),
			"@trystero-p2p/core": pkgVersion("@trystero-p2p/core"),
			"@trystero-p2p/nostr": pkgVersion("@trystero-p2p/nostr"),
			"octagonal-wheels": pkgVersion("octagonal-wheels"),
		},
		node: process.version,
		fixedNowMs: fixedNow,
	},
	roomPasswords: roomPasswords.map(({ passphrase, murmur, fnv1a, password }) => ({ passphrase, murmur, fnv1a, password })),
	sha1b36,
	topics,
	ids,
	sdp,
	sdpOpenVariants,
	handshakes,
	handshakeInitiator: initiator,
	presenceFrames: presence,
	roomFrame: roomFrameExample,
	frameParsing,
	actionFrames,
	nonceWrap,
	loneSurrogates,
	reassembly,
	receiverEdgeCases,
	textDecoding,
	leaderPairs,
	signalling,
	nostrEvents,
	nostrSubscribe,
	constants,
	transcripts,
	joinRoom: joinRoomRun,
};
mkdirSync(dirname(outFile), { recursive: true });
writeFileSync(outFile, JSON.stringify(vectors, null, "\t") + "\n");
console.log(`wrote ${outFile}`);
process.exit(0);
