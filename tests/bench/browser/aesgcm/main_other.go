//go:build !(js && wasm)

// Command aesgcm measures AES-256-GCM on 1 KiB chunks inside a js/wasm
// module in a browser: Go's crypto/aes + crypto/cipher against the host's
// WebCrypto (crypto.subtle) called through syscall/js, each awaited as
// the engine would await it. Build it with GOOS=js GOARCH=wasm; the page
// tests/bench/browser/pages/aesgcm.html drives it (run.sh).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "aesgcm runs in a browser: build it with GOOS=js GOARCH=wasm (see tests/bench/browser/run.sh)")
	os.Exit(2)
}
