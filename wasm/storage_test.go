//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall/js"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/internal/idb/fakeidb"
)

// TestMain gives Node an IndexedDB (fake-indexeddb).
func TestMain(m *testing.M) {
	if err := fakeidb.Install(filepath.Join("internal", "idb", "testdata")); err != nil {
		fmt.Fprintln(os.Stderr, "the storage tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func jsValue(t *testing.T, src string) js.Value {
	t.Helper()
	return js.Global().Get("JSON").Call("parse", src)
}

func TestParseStorage(t *testing.T) {
	for _, c := range []struct {
		src  string // JSON; "" is undefined
		want storageOptions
	}{
		{"", storageOptions{kind: "memory"}},
		{`null`, storageOptions{kind: "memory"}},
		{`"memory"`, storageOptions{kind: "memory"}},
		{`"indexeddb"`, storageOptions{kind: "indexeddb", name: "livesync-go"}},
		{`{"kind":"indexeddb"}`, storageOptions{kind: "indexeddb", name: "livesync-go"}},
		{`{"kind":"indexeddb","name":"vault-2"}`, storageOptions{kind: "indexeddb", name: "vault-2"}},
		{`{"kind":"memory"}`, storageOptions{kind: "memory"}},
	} {
		v := js.Undefined()
		if c.src != "" {
			v = jsValue(t, c.src)
		}
		got, err := parseStorage(v)
		if err != nil || got != c.want {
			t.Errorf("parseStorage(%s) = %+v, %v; want %+v", c.src, got, err, c.want)
		}
	}
	for _, src := range []string{`"localstorage"`, `{"kind":"opfs"}`, `{"kind":"indexeddb","name":3}`, `7`, `{}`} {
		if _, err := parseStorage(jsValue(t, src)); classify(err).Code != CodeBadOptions {
			t.Errorf("parseStorage(%s): %v, want code bad_options", src, err)
		}
	}
}

// settle waits for a Promise: its value, or the code of its rejection.
func settle(p js.Value) (js.Value, string) {
	ch := make(chan [2]js.Value, 1)
	ok := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- [2]js.Value{arg(a, 0), js.Undefined()}; return nil })
	fail := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- [2]js.Value{js.Undefined(), arg(a, 0)}; return nil })
	defer ok.Release()
	defer fail.Release()
	p.Call("then", ok, fail)
	r := <-ch
	if r[1].IsUndefined() {
		return r[0], ""
	}
	return js.Undefined(), r[1].Get("code").String()
}

// TestIndexedDBStorage: a replica in IndexedDB outlives its store, one
// handle at a time (code "busy"), and deleteStorage deletes it.
func TestIndexedDBStorage(t *testing.T) {
	ctx := context.Background()
	so := storageOptions{kind: "indexeddb", name: "storage-test"}
	st, err := openStore(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, []byte(`{"_id":"a","v":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(ctx, so); classify(err).Code != CodeBusy {
		t.Fatalf("a second open: %v, want code busy", err)
	}
	api := object()
	setStorageAPI(api)
	if _, code := settle(api.Call("deleteStorage", so.name)); code != CodeBusy {
		t.Fatalf("deleteStorage of an open replica: code %q, want busy", code)
	}
	st.Close() // closes the database too: the next open gets in

	st, err = openStore(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "a", store.GetOptions{}); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
	st.Close()
	if _, code := settle(api.Call("deleteStorage", so.name)); code != "" {
		t.Fatalf("deleteStorage: code %q", code)
	}
	st, err = openStore(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if info, _ := st.Info(ctx); info.DocCount != 0 {
		t.Fatalf("after deleteStorage the replica has %d documents", info.DocCount)
	}
	if _, code := settle(api.Call("deleteStorage", 3)); code != CodeBadOptions {
		t.Fatalf("deleteStorage(3): code %q, want bad_options", code)
	}
}
