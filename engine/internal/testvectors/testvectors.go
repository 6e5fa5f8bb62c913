// Package testvectors locates the LiveSync interop vectors that tests of
// the engine read. The vectors were produced by the real LiveSync library
// and are copied into engine/testdata/vectors so that tests pass on a
// fresh clone; see engine/testdata/vectors/README.md for their provenance.
package testvectors

import (
	"path/filepath"
	"runtime"
)

// Dir returns the absolute path of engine/testdata/vectors.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "vectors")
}

// Path returns the absolute path of a file below the vectors directory,
// given as a slash-separated relative name such as "chunks/index.json".
func Path(name string) string {
	return filepath.Join(Dir(), filepath.FromSlash(name))
}
