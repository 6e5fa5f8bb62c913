package dump

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// A new vault's dump, encrypted or not, reads back into the same files,
// with the chunks before the metadata and the system documents the plugin
// expects.
func TestBuildThenDecode(t *testing.T) {
	for _, s := range []livesync.Settings{
		{CustomChunkSize: 60},
		{CustomChunkSize: 60, Encrypt: true, PathObfuscation: true, Passphrase: "secret"},
	} {
		b, err := NewBuilder(s)
		if err != nil {
			t.Fatal(err)
		}
		at := time.UnixMilli(1700000000000)
		files := map[string]string{"a.md": "alpha\n", "notes/b.md": "alpha\n", "i:.obsidian/app.json": "{}"}
		for p, text := range files {
			if err := b.Add(p, []byte(text), at); err != nil {
				t.Fatal(err)
			}
		}
		if b.Files() != 3 || b.Chunks() != 2 {
			t.Errorf("%d files, %d chunks; want 3 and 2 (a shared chunk once)", b.Files(), b.Chunks())
		}
		var out bytes.Buffer
		if err := b.Write(&out, negotiate.DeviceInfo{DeviceName: "test", VaultName: "v"}, at); err != nil {
			t.Fatal(err)
		}
		docs, local, err := Read(&out)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2; len(local) != want-boolInt(!s.Encrypt) {
			t.Errorf("local docs %d (encrypt %v)", len(local), s.Encrypt)
		}
		if _, err := Decode(docs, local, ""); s.Encrypt && !errors.Is(err, ErrNeedPassphrase) {
			t.Errorf("no passphrase: %v", err)
		}
		if s.Encrypt {
			if _, err := Decode(docs, local, "wrong"); !errors.Is(err, engine.ErrDecrypt) {
				t.Errorf("wrong passphrase: %v", err)
			}
		}
		v, err := Decode(docs, local, s.Passphrase)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Files) != 3 || len(v.Broken) != 0 {
			t.Fatalf("files %+v broken %+v", v.Files, v.Broken)
		}
		for _, m := range v.Files {
			data, err := v.ReadFile(m)
			if err != nil || string(data) != files[m.Path] || m.MTime != at.UnixMilli() {
				t.Errorf("%s: %q %v (mtime %d)", m.Path, data, err, m.MTime)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Read takes the three shapes; a row without its document is refused
// unless it is deleted.
func TestReadShapes(t *testing.T) {
	for _, in := range []string{
		`[{"_id":"a"},{"_id":"_local/x"}]`,
		`{"docs":[{"_id":"a"},{"_id":"_local/x"}]}`,
		`{"rows":[{"id":"a","doc":{"_id":"a"}},{"id":"gone","value":{"rev":"2-x","deleted":true}}],"local_docs":[{"_id":"_local/x"}]}`,
	} {
		docs, local, err := Read(strings.NewReader(in))
		if err != nil || len(docs) != 1 || docs[0].ID() != "a" || len(local) != 1 {
			t.Errorf("%s: %v %v %v", in, docs, local, err)
		}
	}
	for _, in := range []string{`{"rows":[{"id":"a"}]}`, `[{"x":1}]`, `"text"`} {
		if _, _, err := Read(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

// FuzzRead: no input makes Read panic, and what it reads writes back.
func FuzzRead(f *testing.F) {
	f.Add(`[{"_id":"a","_rev":"1-x"}]`)
	f.Add(`{"rows":[{"id":"a","doc":{"_id":"a"}}],"local_docs":[{"_id":"_local/m"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		docs, local, err := Read(strings.NewReader(in))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Write(&out, docs, local); err != nil {
			t.Fatal(err)
		}
		if again, _, err := Read(&out); err != nil || len(again) != len(docs) {
			t.Fatalf("%q: %d docs, then %d: %v", in, len(docs), len(again), err)
		}
	})
}
