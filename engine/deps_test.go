//go:build !js && !wasip1

package engine_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyGuard enforces the engine's layering rule (it stays pure
// so that it builds for wasm and has no transport): engine/... never imports net/http (not even transitively),
// never imports os or syscall/js directly, and imports no adapter, cmd or
// wasm package. It checks the native and the js/wasm build.
func TestDependencyGuard(t *testing.T) {
	for _, goos := range []string{"", "js"} {
		args := []string{"list", "-deps=false", "-json=ImportPath,Imports,Deps", "./..."}
		cmd := exec.Command("go", args...)
		cmd.Env = os.Environ()
		if goos != "" {
			cmd.Env = append(cmd.Env, "GOOS=js", "GOARCH=wasm")
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (GOOS=%q): %v", goos, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		n := 0
		for dec.More() {
			var p struct {
				ImportPath string
				Imports    []string
				Deps       []string
			}
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			n++
			for _, imp := range p.Imports {
				switch imp {
				case "os", "syscall/js", "net/http", "os/exec", "net":
					t.Errorf("GOOS=%q: %s imports %s directly", goos, p.ImportPath, imp)
				}
			}
			for _, dep := range p.Deps {
				if dep == "net/http" || strings.Contains(dep, "/livesync-go/adapters/") ||
					strings.Contains(dep, "/livesync-go/cmd/") || strings.Contains(dep, "/livesync-go/wasm") {
					t.Errorf("GOOS=%q: %s depends on %s", goos, p.ImportPath, dep)
				}
			}
		}
		if n == 0 {
			t.Fatalf("GOOS=%q: go list found no engine packages", goos)
		}
	}
}
