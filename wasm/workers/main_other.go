//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "wasm/workers is a Cloudflare Worker: build it with wasm/workers/build.sh (GOOS=js GOARCH=wasm)")
	os.Exit(2)
}
