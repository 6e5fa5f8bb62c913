// Package decorate wraps the engine's ports (engine.ChunkSource,
// engine.Endpoint, journalsync.Objects, store.Store) in behaviour that
// is not part of any one transport: retrying transient failures (Retry*,
// Do), metering requests (Metered*), asking several chunk sources in
// turn (Multi), re-encrypting documents at a salt boundary (Recode), and
// a plaintext view of a store that keeps the remote, encrypted form
// (CodecView).
//
// An adapter implements a port once, plainly; an embedder composes what
// it needs:
//
//	src := decorate.Metered(decorate.RetrySource(remote, decorate.Policy{}), meter)
//
// Retrying follows one classification (Retryable): only transport
// failures (*engine.Error with StageTransport) are tried again, never an
// error marked engine.Permanent, an authentication, decode, decryption
// or not-found failure, nor a cancelled context.
package decorate
