// Command wasm is the engine's vault client built for GOOS=js
// GOARCH=wasm: a note-sync plugin or a web page loads livesync.wasm with
// Go's wasm_exec.js and the loader in js/index.mjs, and gets a LiveSync
// vault (the vault package of the engine) as one JavaScript object.
//
// The module registers its API with the function whose global name is
// its first argument (the loader passes one). The API has open(options),
// which returns a Promise of a vault handle; every method of the handle
// but on() returns a Promise, and every failure is a JS Error carrying
// code (a stable name: "wrong_passphrase", "unreachable", "locked",
// "not_found", "unauthorized", …), stage and docId.
//
// The module owns no I/O: HTTP goes through the fetch-compatible
// function the host passes (host.fetch, else the global fetch), and the
// replica is kept in memory or in IndexedDB.
//
// Built with -tags p2p (livesync-p2p.wasm), a vault also has p2p(options),
// which joins a LiveSync P2P room over the host's RTCPeerConnection and
// WebSocket (passed in options.host, else the globals) and serves the
// vault's replica to the peers there (p2p.go).
//
// Built for another platform, the command only says how to build it.
package main
