//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/internal/idb"
)

// defaultDBName is the IndexedDB database of storage "indexeddb".
const defaultDBName = "livesync-go"

// storageOptions are open's storage: where the replica lives.
type storageOptions struct {
	kind string // "memory" (the zero value's meaning) or "indexeddb"
	name string // the database name, for a persistent kind
}

// parseStorage reads open's storage option: absent or "memory" (the
// replica lives as long as the handle), "indexeddb" (the database
// "livesync-go") or {kind: "indexeddb", name}.
func parseStorage(v js.Value) (storageOptions, error) {
	kind, name := "", ""
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return storageOptions{kind: "memory"}, nil
	case js.TypeString:
		kind = v.String()
	case js.TypeObject:
		var err error
		if kind, err = str(v, "kind"); err != nil {
			return storageOptions{}, err
		}
		if name, err = str(v, "name"); err != nil {
			return storageOptions{}, err
		}
	}
	switch kind {
	case "memory":
		return storageOptions{kind: "memory"}, nil
	case "indexeddb":
		if name == "" {
			name = defaultDBName
		}
		return storageOptions{kind: kind, name: name}, nil
	}
	return storageOptions{}, &optionsError{msg: fmt.Sprintf(`storage %s is not one of "memory", "indexeddb" or {kind: "indexeddb", name}`,
		js.Global().Get("JSON").Call("stringify", v).String())}
}

// openStore opens the replica's store; closing the store closes the
// database.
func openStore(ctx context.Context, so storageOptions) (store.Store, error) {
	opts := store.Options{Name: "livesync-wasm"}
	if so.kind != "indexeddb" {
		return store.NewMemory(opts)
	}
	b, err := idb.Open(ctx, so.name)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(b, opts)
	if err != nil {
		b.Close()
		return nil, err
	}
	return st, nil
}

// setStorageAPI adds deleteStorage(name = "livesync-go") to the API: it
// deletes the IndexedDB database of a replica no handle has open, and
// rejects with code "busy" while one has.
func setStorageAPI(api js.Value) {
	api.Set("deleteStorage", method(func(args []js.Value) (func() (any, error), error) {
		name := defaultDBName
		switch v := arg(args, 0); v.Type() {
		case js.TypeUndefined, js.TypeNull:
		case js.TypeString:
			name = v.String()
			if name == "" {
				return nil, &optionsError{msg: "deleteStorage needs the IndexedDB database's name"}
			}
		default:
			return nil, &optionsError{msg: "deleteStorage takes the IndexedDB database's name (a string)"}
		}
		return func() (any, error) { return nil, idb.Delete(context.Background(), name) }, nil
	}))
}
