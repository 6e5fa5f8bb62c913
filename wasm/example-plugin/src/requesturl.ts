// An adapter from Obsidian's requestUrl to the engine's host fetch.
//
// requestUrl goes through the app's own networking (Electron on the
// desktop, the native HTTP client on mobile), so the server needs no CORS
// headers for the app's origin, which window.fetch would. What it gives
// up:
//
//   - No streaming: the promise settles once the whole body has arrived.
//     Every request of the engine still works (each answer is one
//     complete JSON body), and so does live sync, which polls CouchDB's
//     _changes with feed=longpoll (the server answers when a change
//     arrives or after its timeout) and polls an S3 journal. A
//     continuous _changes feed, whose body never ends, would never
//     settle; the engine does not use one.
//   - No abort: requestUrl cannot be cancelled. When the engine aborts
//     (stop(), close()), the promise this adapter returned rejects at
//     once, so the engine moves on; the request itself runs to its end in
//     the background (a pending longpoll ends at the server's timeout,
//     60 s by default) and its answer is dropped.
//   - The whole body is held in memory, also for large answers.
//
// Only types are imported from "obsidian", so the adapter runs in any
// page with a stand-in for requestUrl (the browser test uses one over
// window.fetch).
import type { RequestUrlParam, RequestUrlResponse } from "obsidian";
import type { HostFetch } from "livesync-go-wasm";

/** The part of Obsidian's requestUrl the adapter uses. */
export type RequestUrl = (request: RequestUrlParam) => Promise<RequestUrlResponse>;

// Headers the host's networking sets itself; passing them can make a
// request fail.
const dropped = new Set(["content-length", "host", "connection", "accept-encoding"]);

/** requestUrlFetch returns a HostFetch that sends every request through requestUrl. */
export function requestUrlFetch(requestUrl: RequestUrl): HostFetch {
  return async (url, init) => {
    const signal = init.signal;
    signal?.throwIfAborted();
    const headers: Record<string, string> = {};
    let contentType: string | undefined;
    for (const [key, value] of Object.entries(init.headers ?? {})) {
      const k = key.toLowerCase();
      if (k === "content-type") {
        contentType = value;
      } else if (!dropped.has(k)) {
        headers[key] = value;
      }
    }
    const request: RequestUrlParam = {
      url,
      method: init.method,
      headers,
      contentType,
      body: init.body === undefined ? undefined : toArrayBuffer(init.body),
      // 4xx and 5xx answers are answers: the engine reads their status
      // and body (CouchDB's error document).
      throw: false,
    };
    const res = await untilAborted(requestUrl(request), signal);
    const body = res.arrayBuffer;
    return {
      status: res.status,
      headers: res.headers,
      arrayBuffer: async () => body,
    };
  };
}

// toArrayBuffer copies a BufferSource into an ArrayBuffer of its own
// (requestUrl takes only an ArrayBuffer or a string).
function toArrayBuffer(body: BufferSource): ArrayBuffer {
  if (body instanceof ArrayBuffer) {
    return body.slice(0);
  }
  const view = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  return view.slice().buffer;
}

// untilAborted settles as p does, or rejects with the signal's reason
// when it aborts first.
function untilAborted<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) {
    return p;
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? new DOMException("aborted", "AbortError"));
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
