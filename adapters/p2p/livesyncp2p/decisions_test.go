//go:build !js

package livesyncp2p

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestFileDecisionsPersist(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p2p-device-decisions.json")
	d, err := OpenFileDecisions(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.Decision(ctx, "laptop"); ok || err != nil {
		t.Fatalf("a new file has a decision: %v %v", ok, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("opening created the file: %v", err)
	}
	for name, accept := range map[string]bool{"laptop": true, "Phone 📱": false, "tablet": true} {
		if err := d.SetDecision(ctx, name, accept); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteDecision(ctx, "tablet"); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteDecision(ctx, "never stored"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", fi.Mode().Perm())
	}
	again, err := OpenFileDecisions(path)
	if err != nil {
		t.Fatal(err)
	}
	got := again.All()
	if len(got) != 2 || got["laptop"] != true || v(got, "Phone 📱") != "false" {
		t.Fatalf("reopened decisions %v", got)
	}
	// Names are kept exactly: the plugin looks them up as they are.
	if _, ok, _ := again.Decision(ctx, "LAPTOP"); ok {
		t.Fatal("decision found under another case")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func v(m map[string]bool, k string) string {
	b, ok := m[k]
	if !ok {
		return "absent"
	}
	return fmt.Sprint(b)
}

func TestFileDecisionsCorrupt(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"truncated": `{"laptop": tr`,
		"array":     `["laptop"]`,
		"null":      `null`,
		"not bool":  `{"laptop": "yes"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := OpenFileDecisions(path)
		if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming the corrupt file", name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != body {
			t.Errorf("%s: the corrupt file was changed to %q", name, b)
		}
	}
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err := OpenFileDecisions(empty); err != nil || len(d.All()) != 0 {
		t.Fatalf("an empty file: %v, %v", d, err)
	}
	if _, err := OpenFileDecisions(""); err == nil {
		t.Fatal("no path accepted")
	}
	if _, err := OpenFileDecisions(dir); err == nil {
		t.Fatal("a directory accepted")
	}
}

// A write that cannot be made keeps the file and the decisions as they
// were.
func TestFileDecisionsFailedWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFileDecisions(filepath.Join(dir, "d.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.SetDecision(ctx, "laptop", true); err != nil {
		t.Fatal(err)
	}
	// The directory goes away (as on an unmounted volume): writes fail.
	if err := os.Rename(dir, dir+"-moved"); err != nil {
		t.Fatal(err)
	}
	if err := d.SetDecision(ctx, "laptop", false); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
	if err := d.SetDecision(ctx, "phone", true); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
	if err := d.DeleteDecision(ctx, "laptop"); err == nil {
		t.Fatal("a delete in a missing directory succeeded")
	}
	if got := d.All(); len(got) != 1 || !got["laptop"] {
		t.Fatalf("decisions after failed writes: %v", got)
	}
}

func TestFileDecisionsConcurrent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.json")
	d, err := OpenFileDecisions(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				name := fmt.Sprintf("device-%d-%d", i, j)
				if err := d.SetDecision(ctx, name, j%2 == 0); err != nil {
					t.Error(err)
				}
				if _, ok, _ := d.Decision(ctx, name); !ok {
					t.Errorf("%s not found after SetDecision", name)
				}
			}
		})
	}
	wg.Wait()
	again, err := OpenFileDecisions(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(again.All()); n != 80 {
		t.Fatalf("%d decisions in the file, want 80", n)
	}
}
