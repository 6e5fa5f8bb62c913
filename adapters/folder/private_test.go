package folder

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWritePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	for _, data := range []string{"first", "second, longer"} {
		if err := WritePrivate(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("%d entries in the folder, want the file alone (no temporary left)", len(entries))
	}
	if err := WritePrivate(filepath.Join(t.TempDir(), "missing", "secret"), nil); err == nil {
		t.Error("a missing folder: no error")
	}
}
