// Package engine is the transport-neutral core of livesync-go: the domain
// types, errors and ports shared by the wire-format packages below it
// (docid, chunk, chunkid, e2ee, journal, livesync) and by the adapters,
// the relay and the CLI that sit outside it.
//
// engine and its sub-packages import only the standard library and small
// pure-Go modules. They never import net/http, os, syscall/js or an
// adapter, so the same code builds natively and for GOOS=js GOARCH=wasm;
// a test in this package enforces that.
package engine
