// A LiveSync RPC room over one Trystero action ("rpc2"), written for the
// Chromium interop test from the wire description of LiveSync's P2P
// mode (commonlib src/rpc/RpcRoom.ts and chunking.ts are the upstream
// originals; this is an independent implementation).
//
// Wire messages: {wire:"raw", payload: <envelope JSON text>},
// {wire:"chunk", streamId, index, total, payload: <part of the text>} and
// {wire:"chunk-ack", streamId, missing: [indices]} (empty: complete).
// An envelope whose UTF-8 length exceeds maxWirePayloadBytes is split in
// UTF-16 code units, max(16, floor(max/2)) at a time, each part shortened
// until its UTF-8 fits; a part may so end in half a surrogate pair,
// which JavaScript strings carry and join back as they are.
//
// Envelopes: handshake {kind, versionMajor:1, versionMinor:0} on join;
// request {requestId, method, args}; response {requestId, ok, data} or
// {ok:false, error:{code, message, details?}}; cancel {requestId}.

export const DEFAULT_MAX_WIRE = 15360;
const MIN_MAX_WIRE = 800;
const CHUNK_MISSING_RETRY_MS = 150;
const STREAM_IDLE_MS = 60000;

export class RpcError extends Error {
  constructor(code, message, details) {
    super(message || code);
    this.code = code;
    this.details = details;
  }
}

const encoder = new TextEncoder();
/** UTF-8 length of a JavaScript string; a lone surrogate counts 3 bytes, as it is sent. */
export const utf8Length = (s) => encoder.encode(s).length;

const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;

/** Splits s into parts of at most max(16, floor(max/2)) code units whose UTF-8 length is at most max. */
export function splitPayload(s, max) {
  const step = Math.max(16, Math.floor(max / 2));
  const parts = [];
  let i = 0;
  while (i < s.length) {
    let end = Math.min(s.length, i + step);
    while (end - i > 1 && utf8Length(s.slice(i, end)) > max) {
      end = i + Math.max(1, Math.floor(((end - i) * 7) / 8));
    }
    parts.push(s.slice(i, end));
    i = end;
  }
  return parts;
}

/** Whether part ends with the high half of a pair whose low half starts next. */
export const endsInSplitPair = (part, next) => part.length > 0 && next !== undefined && isHigh(part.charCodeAt(part.length - 1)) && isLow(next.charCodeAt(0));

const base36 = "0123456789abcdefghijklmnopqrstuvwxyz";
function newId(prefix) {
  const r = crypto.getRandomValues(new Uint8Array(8));
  let tail = "";
  for (const b of r) {
    tail += base36[b % 36];
  }
  return `${prefix}-${Date.now().toString(36)}-${tail}`;
}

export class RpcRoom {
  /**
   * action: a Trystero action ({send(data, {target}), onMessage}).
   * canAccept(peer, method): whether a request is served (others are dropped unanswered).
   */
  constructor({ action, maxWirePayloadBytes = DEFAULT_MAX_WIRE, canAccept = () => true }) {
    this.action = action;
    this.max = Number.isSafeInteger(maxWirePayloadBytes) && maxWirePayloadBytes >= MIN_MAX_WIRE && maxWirePayloadBytes <= DEFAULT_MAX_WIRE ? maxWirePayloadBytes : DEFAULT_MAX_WIRE;
    this.canAccept = canAccept;
    this.handlers = new Map();
    this.pending = new Map(); // requestId -> {peer, resolve, reject, timer}
    this.serving = new Map(); // peer + requestId -> AbortController
    this.outStreams = new Map(); // streamId -> {peer, parts, idle}
    this.inStreams = new Map(); // peer + streamId -> {total, parts, retry, idle}
    this.handshakes = new Map(); // peer -> handshake envelope
    // What crossed, for the test to inspect.
    this.stats = { sentRaw: 0, sentStreams: 0, sentParts: 0, sentSplitPairs: 0, receivedRaw: 0, receivedStreams: 0, receivedParts: 0, receivedSplitPairs: 0, largestReceived: 0, largestSent: 0, dropped: [] };
    action.onMessage = (msg, meta) => this.receive(msg, meta.peerId);
  }

  handle(method, fn) {
    this.handlers.set(method, fn);
  }

  peerJoined(peer) {
    this.sendEnvelope(peer, { kind: "handshake", versionMajor: 1, versionMinor: 0 }).catch(() => {});
  }

  peerLeft(peer) {
    for (const [id, p] of this.pending) {
      if (p.peer === peer) {
        this.pending.delete(id);
        clearTimeout(p.timer);
        p.reject(new RpcError("NOT_CONNECTED", "peer left"));
      }
    }
    for (const [k, s] of this.inStreams) {
      if (k.startsWith(peer + "\n")) {
        clearTimeout(s.retry);
        clearTimeout(s.idle);
        this.inStreams.delete(k);
      }
    }
  }

  /** Calls method on peer; timeoutMs 0 waits forever. */
  call(peer, method, args = [], timeoutMs = 30000) {
    const requestId = newId("req");
    return new Promise((resolve, reject) => {
      const p = { peer, resolve, reject, timer: undefined };
      if (timeoutMs > 0) {
        p.timer = setTimeout(() => {
          this.pending.delete(requestId);
          this.sendEnvelope(peer, { kind: "cancel", requestId }).catch(() => {});
          reject(new RpcError("TIMEOUT", `${method} timed out after ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.pending.set(requestId, p);
      this.sendEnvelope(peer, { kind: "request", requestId, method, args }).catch((err) => {
        this.pending.delete(requestId);
        clearTimeout(p.timer);
        reject(new RpcError("NOT_CONNECTED", String(err?.message ?? err)));
      });
    });
  }

  async sendWire(peer, wire) {
    await this.action.send(wire, { target: peer });
  }

  async sendEnvelope(peer, env) {
    const text = JSON.stringify(env);
    const size = utf8Length(text);
    this.stats.largestSent = Math.max(this.stats.largestSent, size);
    if (size <= this.max) {
      this.stats.sentRaw++;
      await this.sendWire(peer, { wire: "raw", payload: text });
      return;
    }
    const streamId = newId("stream");
    const parts = splitPayload(text, this.max);
    const out = { peer, parts, idle: setTimeout(() => this.outStreams.delete(streamId), STREAM_IDLE_MS) };
    this.outStreams.set(streamId, out);
    this.stats.sentStreams++;
    for (let index = 0; index < parts.length; index++) {
      if (endsInSplitPair(parts[index], parts[index + 1])) {
        this.stats.sentSplitPairs++;
      }
      this.stats.sentParts++;
      await this.sendWire(peer, { wire: "chunk", streamId, index, total: parts.length, payload: parts[index] });
    }
  }

  receive(msg, peer) {
    if (!msg || typeof msg !== "object") {
      return this.drop(peer, "not an object");
    }
    switch (msg.wire) {
      case "raw":
        if (typeof msg.payload !== "string") {
          return this.drop(peer, "raw without payload");
        }
        this.stats.receivedRaw++;
        this.stats.largestReceived = Math.max(this.stats.largestReceived, utf8Length(msg.payload));
        return this.onText(peer, msg.payload);
      case "chunk":
        return this.onChunk(peer, msg);
      case "chunk-ack":
        return this.onAck(peer, msg);
      default:
        return this.drop(peer, `unknown wire ${msg.wire}`);
    }
  }

  drop(peer, why) {
    this.stats.dropped.push(`${peer}: ${why}`);
  }

  onChunk(peer, m) {
    const { streamId, index, total, payload } = m;
    if (typeof streamId !== "string" || !Number.isInteger(index) || !Number.isInteger(total) || total < 1 || index < 0 || index >= total || typeof payload !== "string") {
      return this.drop(peer, "malformed chunk");
    }
    const key = peer + "\n" + streamId;
    let s = this.inStreams.get(key);
    if (!s) {
      s = { total, parts: new Map() };
      this.inStreams.set(key, s);
    }
    if (s.total !== total) {
      return this.drop(peer, "chunk total changed");
    }
    this.stats.receivedParts++;
    s.parts.set(index, payload);
    clearTimeout(s.retry);
    clearTimeout(s.idle);
    if (s.parts.size < s.total) {
      s.retry = setTimeout(() => {
        const missing = [];
        for (let i = 0; i < s.total; i++) {
          if (!s.parts.has(i)) {
            missing.push(i);
          }
        }
        this.sendWire(peer, { wire: "chunk-ack", streamId, missing }).catch(() => {});
      }, CHUNK_MISSING_RETRY_MS);
      s.idle = setTimeout(() => this.inStreams.delete(key), STREAM_IDLE_MS);
      return;
    }
    this.inStreams.delete(key);
    const parts = [];
    for (let i = 0; i < s.total; i++) {
      parts.push(s.parts.get(i));
      if (endsInSplitPair(parts[i], s.parts.get(i + 1))) {
        this.stats.receivedSplitPairs++;
      }
    }
    this.stats.receivedStreams++;
    this.sendWire(peer, { wire: "chunk-ack", streamId, missing: [] }).catch(() => {});
    const text = parts.join("");
    this.stats.largestReceived = Math.max(this.stats.largestReceived, utf8Length(text));
    this.onText(peer, text);
  }

  onAck(peer, m) {
    const out = this.outStreams.get(m.streamId);
    if (!out || out.peer !== peer || !Array.isArray(m.missing)) {
      return;
    }
    if (m.missing.length === 0) {
      clearTimeout(out.idle);
      this.outStreams.delete(m.streamId);
      return;
    }
    for (const i of new Set(m.missing)) {
      if (Number.isInteger(i) && i >= 0 && i < out.parts.length) {
        this.sendWire(peer, { wire: "chunk", streamId: m.streamId, index: i, total: out.parts.length, payload: out.parts[i] }).catch(() => {});
      }
    }
  }

  onText(peer, text) {
    let env;
    try {
      env = JSON.parse(text);
    } catch {
      return this.drop(peer, "envelope is not JSON");
    }
    switch (env?.kind) {
      case "handshake":
        this.handshakes.set(peer, env);
        return;
      case "request":
        return this.onRequest(peer, env);
      case "response":
        return this.onResponse(peer, env);
      case "cancel":
        this.serving.get(peer + "\n" + env.requestId)?.abort();
        return;
      default:
        return this.drop(peer, `unknown envelope kind ${env?.kind}`);
    }
  }

  onResponse(peer, env) {
    const p = this.pending.get(env.requestId);
    if (!p || p.peer !== peer) {
      return;
    }
    this.pending.delete(env.requestId);
    clearTimeout(p.timer);
    if (env.ok === true) {
      p.resolve(env.data);
    } else {
      const e = env.error ?? {};
      p.reject(new RpcError(e.code ?? "REMOTE_ERROR", e.message ?? "", e.details));
    }
  }

  async onRequest(peer, env) {
    const { requestId, method, args } = env;
    if (typeof requestId !== "string") {
      return this.drop(peer, "request without id");
    }
    const answer = (body) => this.sendEnvelope(peer, { kind: "response", requestId, ...body }).catch(() => {});
    if (typeof method !== "string" || !(method.includes(".") || method.includes("/")) || !Array.isArray(args ?? [])) {
      return answer({ ok: false, error: { code: "PROTOCOL_ERROR", message: `invalid request ${JSON.stringify(method)}` } });
    }
    if (!this.canAccept(peer, method)) {
      // Dropped without an answer, as LiveSync drops an unaccepted peer's requests.
      this.drop(peer, `refused ${method}`);
      return;
    }
    const fn = this.handlers.get(method);
    if (!fn) {
      return answer({ ok: false, error: { code: "REMOTE_ERROR", message: `Method not found: ${method}` } });
    }
    const key = peer + "\n" + requestId;
    const ctl = new AbortController();
    this.serving.set(key, ctl);
    try {
      const data = await fn(peer, args ?? [], ctl.signal);
      await answer(ctl.signal.aborted ? { ok: false, error: { code: "CANCELLED", message: "cancelled" } } : { ok: true, data });
    } catch (err) {
      const details = err && typeof err === "object" && ("status" in err || "name" in err) ? { status: err.status, name: err.name, reason: err.reason ?? err.message } : undefined;
      await answer({ ok: false, error: { code: err?.code && /^[A-Z_]+$/.test(err.code) ? err.code : "REMOTE_ERROR", message: String(err?.message ?? err), ...(details ? { details } : {}) } });
    } finally {
      this.serving.delete(key);
    }
  }
}
