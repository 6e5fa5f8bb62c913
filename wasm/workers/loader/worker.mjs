// The Worker's entry (build.sh copies it over syumai/workers' generated
// worker.mjs unless LIVESYNC_WORKER_LOADER=request): one Go instance per
// isolate, started on the isolate's first event, serves every request
// and Cron Trigger event after it, concurrently, instead of a fresh
// instance per event.
//
// workerd ties timers, subrequests and streams to the request (its I/O
// context) whose code started them and drops them when that request
// ends, and a Go instance runs whichever goroutine is ready in whatever
// event called into it (a longpoll woken by another request's write, a
// timer that expires). So:
//   - a request's body is read and its answer streamed by JavaScript in
//     the request's own context; Go exchanges only plain values with it;
//   - every event keeps a timer of its own while Go works on it: workerd
//     cancels a request that waits with nothing pending in its context as
//     hung, and the timer also calls into Go (poke), whose own timer may
//     sit in the context of a request that has ended;
//   - once Go is done with an event, its context stays alive (waitUntil)
//     until no event is in flight: Go may have started another event's D1
//     query in it (without this, longpolls were seen hanging).
import "./wasm_exec.js";
import { createRuntimeContext, loadModule } from "./runtime.mjs";

// syumai/workers' jsutil.TryCatch calls it.
globalThis.tryCatch = (fn) => {
  try {
    return { result: fn() };
  } catch (error) {
    return { error };
  }
};

const POKE_MS = 1000; // how often an event in flight calls into Go
const HIGH_WATER = 1 << 20; // answer bytes queued before Go waits
const READ_AHEAD = 1 << 20; // request bytes read before Go asks
const IDLE_POLL_MS = 250; // how often an ended event looks whether all are

let current = null; // the running instance: { go, binding, live, ended }
let inflight = 0; // events Go is working on

// instance returns the running instance, starting one if there is none
// (the first event, or the last instance ended: a Go panic outside a
// request). Starting is synchronous: main registers its functions and
// calls ready before it first waits.
async function instance(env, ctx) {
  if (current && !current.go.exited) return current;
  const mod = await loadModule();
  if (current && !current.go.exited) return current;
  const go = new Go();
  const binding = { isolate: true }; // main serves through binding.serve
  const it = { go, binding, live: new Set() };
  // Called by the exiting instance itself (a promise's continuation
  // would run in the context of the event that started it, long gone).
  const exit = go.importObject.gojs["runtime.wasmExit"];
  go.importObject.gojs["runtime.wasmExit"] = (sp) => {
    exit(sp);
    if (current === it) current = null;
    for (const fail of it.live) fail("the Go instance ended");
    it.live.clear();
  };
  let ready = false;
  const inst = new WebAssembly.Instance(mod, {
    ...go.importObject,
    workers: { ready: () => { ready = true; } },
  });
  go.run(inst, createRuntimeContext({ env, ctx, binding }));
  if (!ready || typeof binding.serve !== "function") {
    throw new Error("workers: the Go instance did not start");
  }
  current = it;
  return it;
}

// track counts an event in flight on it and keeps its context busy; the
// function it returns, called in the event's own context once Go is done
// with it, keeps that context alive until no event is in flight.
function track(it, ctx) {
  inflight++;
  const keep = setInterval(() => {
    if (!it.go.exited) it.binding.poke();
  }, POKE_MS);
  return () => {
    clearInterval(keep);
    inflight--;
    if (inflight > 0) ctx.waitUntil(idle());
  };
}

// idle returns once no event is in flight. It polls with timers of this
// context: workerd drops the continuation of a promise another context
// resolves once this request has ended.
async function idle() {
  for (let ms = 10; inflight > 0; ms = Math.min(2 * ms, IDLE_POLL_MS)) {
    await new Promise((r) => setTimeout(r, ms));
  }
}

// source reads a request body ahead of Go, in the request's context.
function source(stream) {
  const reader = stream.getReader();
  const queue = [];
  let bytes = 0, eof = false, error = null, stopped = false;
  let want = null, room = null;
  const take = () => {
    if (queue.length > 0) {
      const chunk = queue.shift();
      bytes -= chunk.byteLength;
      if (room && bytes < READ_AHEAD) { const r = room; room = null; r(); }
      return chunk;
    }
    if (error) return `${error}`;
    if (eof) return null;
    return undefined;
  };
  const give = () => {
    if (!want) return;
    const v = take();
    if (v !== undefined) { const w = want; want = null; w(v); }
  };
  (async () => {
    try {
      while (!stopped) {
        if (bytes >= READ_AHEAD) {
          await new Promise((r) => { room = r; });
          continue;
        }
        const { value, done } = await reader.read();
        if (done) break;
        if (value.byteLength > 0) {
          queue.push(value instanceof Uint8Array ? value : new Uint8Array(value));
          bytes += value.byteLength;
        }
        give();
      }
    } catch (e) {
      error = e;
    }
    eof = true;
    give();
  })();
  return {
    next(done) {
      const v = take();
      if (v === undefined) want = done;
      return v;
    },
    cancel() {
      stopped = true;
      if (room) { const r = room; room = null; r(); }
      reader.cancel().catch(() => {});
    },
  };
}

// answer is the sink Go writes a response into and the stream the
// runtime reads it from. done runs once Go has ended or aborted it.
function answer(done) {
  let headOk, headFail;
  const head = new Promise((ok, fail) => { headOk = ok; headFail = fail; });
  const queue = [];
  let bytes = 0, ended = false, failure = null, gone = false;
  let wake = null, space = null;
  const notify = () => { if (wake) { const w = wake; wake = null; w(); } };
  const release = (v) => { if (space) { const s = space; space = null; s(v); } };
  const finish = () => { if (!ended) { ended = true; notify(); done(); } };
  const sink = {
    head(status, headers) { headOk({ status, headers }); },
    write(chunk, later) {
      if (gone) return false;
      queue.push(chunk);
      bytes += chunk.byteLength;
      notify();
      if (bytes < HIGH_WATER) return true;
      space = later;
      return undefined;
    },
    end: finish,
    abort(reason) {
      failure = new Error(`workers: ${reason}`);
      headFail(failure);
      release(false);
      finish();
    },
  };
  const stream = new ReadableStream({
    async pull(c) {
      while (queue.length === 0 && !ended) await new Promise((r) => { wake = r; });
      if (queue.length > 0) {
        const chunk = queue.shift();
        bytes -= chunk.byteLength;
        if (bytes < HIGH_WATER) release(true);
        c.enqueue(chunk);
      } else if (failure) {
        c.error(failure);
      } else {
        c.close();
      }
    },
    cancel() {
      gone = true;
      queue.length = 0;
      bytes = 0;
      release(false);
    },
  });
  return { sink, head, stream, discard: () => { gone = true; release(false); } };
}

const NULL_BODY = new Set([101, 204, 205, 304]);

async function fetch(req, env, ctx) {
  const it = await instance(env, ctx);
  const untrack = track(it, ctx);
  const body = req.body ? source(req.body) : null;
  let goDone;
  const finished = new Promise((r) => { goDone = r; });
  // Runs in this request's context, whichever context Go ended it from.
  finished.then(() => {
    it.live.delete(a.sink.abort);
    body?.cancel();
    untrack();
  });
  const a = answer(goDone);
  it.live.add(a.sink.abort);
  try {
    it.binding.serve({ method: req.method, url: req.url, headers: [...req.headers], body }, a.sink);
  } catch (e) {
    a.sink.abort(String(e));
  }
  let h;
  try {
    h = await a.head;
  } catch (e) {
    return new Response(`{"error":"internal_server_error","reason":"the request failed"}\n`, {
      status: 500,
      headers: { "Content-Type": "application/json" },
    });
  }
  if (req.method === "HEAD" || NULL_BODY.has(h.status)) {
    // Answer once Go is done with the request: a keep-alive connection
    // answered while its request still ran was seen closing on the
    // client's next request (EOF).
    a.discard();
    await finished;
    return new Response(null, { status: h.status, headers: h.headers });
  }
  return new Response(a.stream, { status: h.status, headers: h.headers });
}

async function scheduled(event, env, ctx) {
  const it = await instance(env, ctx);
  const untrack = track(it, ctx);
  let fail;
  const ended = new Promise((_, reject) => { fail = (why) => reject(new Error(`workers: ${why}`)); });
  it.live.add(fail);
  try {
    await Promise.race([it.binding.runScheduler(event), ended]);
  } finally {
    it.live.delete(fail);
    untrack();
  }
}

export default { fetch, scheduled };
