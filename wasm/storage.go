//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/store"
)

// storageOptions are open's storage: where the replica lives.
type storageOptions struct {
	kind string // "memory" (the zero value's meaning)
	name string // the database name, for a persistent kind
}

// parseStorage reads open's storage option: absent or "memory".
func parseStorage(v js.Value) (storageOptions, error) {
	switch {
	case v.IsUndefined() || v.IsNull():
		return storageOptions{kind: "memory"}, nil
	case v.Type() == js.TypeString && v.String() == "memory":
		return storageOptions{kind: "memory"}, nil
	}
	return storageOptions{}, &optionsError{msg: fmt.Sprintf("storage %s is not available: this build keeps the replica in memory (storage: \"memory\")", js.Global().Get("JSON").Call("stringify", v).String())}
}

// openStore opens the replica's store.
func openStore(_ context.Context, so storageOptions) (store.Store, error) {
	return store.NewMemory(store.Options{Name: "livesync-wasm"})
}
