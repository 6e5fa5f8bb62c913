// Package enginetest holds the engine's port fakes and the conformance
// suites every implementation of a port runs.
//
// The fakes are small and exact, and make no attempt at speed: a
// LocalChunks kept in a map (MemChunks), a ChunkSource answering from a
// map (MapSource) and a journal bucket kept in memory (MemObjects, a
// journalsync.Objects with failure injection and call counts).
//
// The suites take a factory that returns a fresh implementation and its
// cleanup, so that one suite checks every implementation of a port the
// same way: EndpointSuite for engine.Endpoint (CouchDB, the relay's
// server, the local store), ChunkSourceSuite for engine.ChunkSource
// (CouchDB, the journal's pack index, the decorators that combine
// sources) and ObjectsSuite for journalsync.Objects (S3 buckets). The
// package's own tests run them against the fakes and the decorators; each
// adapter runs them against its real server.
package enginetest
