// Package rpcroom is LiveSync's peer-to-peer RPC layer, the RpcRoom of
// commonlib (src/rpc/RpcRoom.ts, types.ts, chunking.ts, errors.ts and
// SPEC.md), without a transport: a Room sends wire messages through a
// Transport port and is fed what arrives with Receive, PeerJoined and
// PeerLeft. Over Trystero the messages travel on the action "rpc2" as
// JSON; the package builds for js/wasm.
//
// # Wire messages and envelopes
//
// A wire message is {"wire":"raw","payload":<envelope JSON text>},
// {"wire":"chunk","streamId","index","total","payload":<part of it>} or
// {"wire":"chunk-ack","streamId","missing":[…]} (an empty list means the
// stream is complete). Envelopes are {"kind":"handshake","versionMajor":1,
// "versionMinor":0}, sent when a peer joins; {"kind":"request",
// "requestId","method","args":[…]}; {"kind":"response","requestId",
// "ok":true,"data"} or {"ok":false,"error":{"code","message","details"}};
// and {"kind":"cancel","requestId"}. Error codes are TIMEOUT,
// NOT_CONNECTED, REMOTE_ERROR, CANCELLED and PROTOCOL_ERROR. Method names
// must contain "." or "/". Request ids are "req-<ms base36>-<8 base36>",
// stream ids "stream-…" alike.
//
// # Chunking and surrogates
//
// An envelope whose UTF-8 length exceeds MaxWirePayloadBytes (15360 by
// default) is split as JavaScript would split the string: in UTF-16 code
// units, max(16, max/2) at a time, each part shortened until its UTF-8
// length fits (SplitUTF16). A part may therefore end with the high half
// of a surrogate pair and the next begin with the low half; JSON.stringify
// writes such halves as \udxxx escapes. The receiver keeps parts by
// stream, asks for missing indices after ChunkMissingRetry (150 ms) of
// quiet, and acknowledges a complete stream with an empty list; streams
// are bounded in parts, bytes (per stream and per peer), number per
// peer and idle time.
//
// encoding/json would turn each lone \udxxx into U+FFFD and break such a
// pair. This package decodes payload strings itself into WTF-8 (UTF-8
// plus 3-byte encodings of lone surrogates), joins the parts, re-forms the
// pairs, and hands the envelope to encoding/json as valid UTF-8 in which
// any surrogate still alone is written back as its \udxxx escape: the
// JSON.stringify text of the same JavaScript value. So a handler's
// json.RawMessage arguments, and a call's returned data, hold a sender's
// lone surrogate as a \udxxx escape; UnquoteUTF16 decodes such a string
// bit-exactly to UTF-16 code units, and passing the raw JSON on sends the
// same string again. Decoding it into a Go string with encoding/json
// gives U+FFFD instead.
//
// # Calls
//
// Call applies the timeout LiveSync's replicator uses for the method
// (MethodTimeout: 30 s by default, db.bulkGet 40 s, legacy/!reqAuth 20 s,
// legacy/getTweakSettings 5 s, legacy/onProgressAcknowledged 500 ms, none
// for reqSync, onProgress, getAllConfig, requestBroadcasting and
// getIsBroadcasting); CallTimeout takes an explicit one. Cancelling the
// context sends a cancel envelope; the peer's handler sees its context
// end and the peer answers CANCELLED. A handler's error reaches the caller
// as REMOTE_ERROR (or the code of an *Error it returned).
//
// Differences from commonlib, all on paths LiveSync peers do not take:
// a response counts only from the peer the request went to; PeerLeft
// fails that peer's waiting calls with NOT_CONNECTED at once instead of
// leaving them to time out; a malformed request with a requestId is
// answered PROTOCOL_ERROR instead of a JavaScript TypeError's
// REMOTE_ERROR; incoming streams are bounded and remembered once
// complete, so a duplicate part cannot deliver an envelope twice; at
// most MaxRequestsPerPeer (64) requests of one peer are served at once,
// more are dropped unanswered; the "serial" registration option is not
// offered.
package rpcroom
