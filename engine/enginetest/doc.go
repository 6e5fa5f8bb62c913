// Package enginetest holds small, hand-written implementations of the
// engine's ports for tests and examples: a LocalChunks kept in a map
// (MemChunks), a ChunkSource answering from a map (MapSource) and a
// journal bucket kept in memory (MemObjects, a journalsync.Objects). They
// are exact but make no attempt at speed.
package enginetest
