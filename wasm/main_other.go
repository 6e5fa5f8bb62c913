//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "this command is the wasm module: build it with GOOS=js GOARCH=wasm (wasm/build.sh)")
	os.Exit(2)
}
