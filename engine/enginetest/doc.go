// Package enginetest holds small, hand-written implementations of the
// engine's ports for tests and examples: a LocalChunks kept in a map and a
// ChunkSource answering from a map. They are exact but make no attempt at
// speed; adapters and stores have their own conformance suites.
package enginetest
