//go:build js && wasm

package main

import (
	"errors"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"
)

// useWebCrypto makes every PBKDF2 of the engine (E2EE keys, Setup URIs)
// run in the host's crypto.subtle, several times faster than Go's in
// wasm. It reports false, and leaves Go's PBKDF2, when the host has no
// crypto.subtle (a page served over plain http from another host).
//
// The derivation waits for a Promise, so it must never run on the
// goroutine of the host's event loop: every API call runs on its own
// goroutine (async).
func useWebCrypto() bool {
	c := js.Global().Get("crypto")
	if c.Type() != js.TypeObject || c.Get("subtle").Type() != js.TypeObject {
		return false
	}
	e2ee.SetPBKDF2(webCryptoPBKDF2)
	return true
}

// webCryptoPBKDF2 is PBKDF2-HMAC-SHA256 through crypto.subtle.deriveBits.
// The password is passed as the bytes it is (never re-encoded).
func webCryptoPBKDF2(password, salt []byte, iter, keyLen int) ([]byte, error) {
	subtle := js.Global().Get("crypto").Get("subtle")
	key, err := await(subtle.Call("importKey", "raw", uint8Array(password), "PBKDF2", false, []any{"deriveBits"}))
	if err != nil {
		return nil, err
	}
	params := object()
	params.Set("name", "PBKDF2")
	params.Set("hash", "SHA-256")
	params.Set("salt", uint8Array(salt))
	params.Set("iterations", iter)
	bits, err := await(subtle.Call("deriveBits", params, key, keyLen*8))
	if err != nil {
		return nil, err
	}
	if bits.Type() != js.TypeObject {
		return nil, errors.New("crypto.subtle.deriveBits returned no bits")
	}
	out := make([]byte, bits.Get("byteLength").Int())
	js.CopyBytesToGo(out, js.Global().Get("Uint8Array").New(bits))
	return out, nil
}

// await waits for the Promise p to settle: its value, or an error with
// the text of its rejection reason.
func await(p js.Value) (js.Value, error) {
	v, rejected := jsawait.Await(p)
	if !rejected {
		return v, nil
	}
	msg := "rejected"
	if v.Type() == js.TypeObject {
		msg = v.Call("toString").String()
	}
	return js.Undefined(), errors.New(msg)
}
