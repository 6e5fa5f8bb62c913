//go:build js && wasm

// Package fakeidb gives the js/wasm tests that run under Node an
// IndexedDB: the npm package fake-indexeddb, installed by `npm ci` in
// wasm/internal/idb/testdata. A browser has its own, which it keeps.
package fakeidb

import (
	"fmt"
	"path/filepath"
	"syscall/js"
)

// Install loads fake-indexeddb from testdata (the path of
// wasm/internal/idb/testdata, relative to the working directory) when the host has no indexedDB.
func Install(testdata string) (err error) {
	if js.Global().Get("indexedDB").Type() == js.TypeObject {
		return nil
	}
	dir, err := filepath.Abs(testdata)
	if err != nil {
		return err
	}
	mod := filepath.Join(dir, "node_modules", "fake-indexeddb", "auto", "index.js")
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fake-indexeddb did not load: run `npm ci` in wasm/internal/idb/testdata (%v)", r)
		}
	}()
	js.Global().Call("require", mod)
	return nil
}
