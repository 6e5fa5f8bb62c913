package holdback

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// vaultDump is the part of engine/testdata/vectors/vault-dump-*.json
// these tests read: the CouchDB-side documents the real plugin wrote.
type vaultDump struct {
	Settings struct {
		Effective negotiate.TweakValues `json:"effective"`
	} `json:"settings"`
	FixedValues struct {
		Passphrase       string `json:"passphrase"`
		PBKDF2SaltBase64 string `json:"pbkdf2SaltBase64"`
	} `json:"fixedValues"`
	Remote struct {
		AllDocs []struct {
			ID  string          `json:"id"`
			Doc json.RawMessage `json:"doc"`
		} `json:"allDocs"`
	} `json:"remote"`
}

func loadDump(t testing.TB, name string) *vaultDump {
	t.Helper()
	b, err := os.ReadFile(testvectors.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	var d vaultDump
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// codec returns the vault's codec with its passphrase and salt.
func (d *vaultDump) codec(t testing.TB) *livesync.Codec {
	t.Helper()
	s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: d.FixedValues.Passphrase}, d.Settings.Effective)
	if err != nil {
		t.Fatal(err)
	}
	salt, err := base64.StdEncoding.DecodeString(d.FixedValues.PBKDF2SaltBase64)
	if err != nil {
		t.Fatal(err)
	}
	c, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// split returns the dump's chunks and its other documents (stored form).
func (d *vaultDump) split() (chunks, metas []json.RawMessage, byID map[string]json.RawMessage) {
	byID = map[string]json.RawMessage{}
	for _, r := range d.Remote.AllDocs {
		byID[r.ID] = r.Doc
		if strings.HasPrefix(r.ID, "h:") {
			chunks = append(chunks, r.Doc)
		} else {
			metas = append(metas, r.Doc)
		}
	}
	return chunks, metas, byID
}

// pushVault pushes every metadata document before any chunk, then the
// chunks in batches of 50, checks that every document is then served
// exactly as pushed, and returns the ids that were visible after the
// metadata push.
func pushVault(t *testing.T, r *rig, d *vaultDump) (visibleBeforeChunks []string) {
	t.Helper()
	chunks, metas, byID := d.split()
	r.push(metas...)
	all, _ := r.changes("")
	visibleBeforeChunks = ids(all)
	for i := 0; i < len(chunks); i += 50 {
		r.push(chunks[i:min(i+50, len(chunks))]...)
	}
	synctest.Wait()
	for id, want := range byID {
		got, err := r.s.Get(bg, id, store.GetOptions{})
		if err != nil {
			t.Fatalf("%s not served: %v", id, err)
		}
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s served\n %s\nwant\n %s", id, got, want)
		}
	}
	if len(r.s.Held()) != 0 {
		t.Fatalf("still held: %+v", r.s.Held())
	}
	return visibleBeforeChunks
}

// With the passphrase in its configuration the relay decrypts metadata in
// memory to decide hold-back. The real plugin's E2EE vault
// with path obfuscation: every note with chunks is held until its chunks
// are pushed, and served unchanged (still encrypted) afterwards.
func TestVaultE2EEWithPassphrase(t *testing.T) {
	d := loadDump(t, "vault-dump-e2ee.json")
	codec := d.codec(t)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{Codec: codec})
		visible := pushVault(t, r, d)
		// Only the version document and the empty file (no chunks) were
		// visible before the chunks.
		if len(visible) != 2 || !slices.Contains(visible, "obsydian_livesync_version") {
			t.Fatalf("visible before the chunks: %v", visible)
		}
		st := r.s.Stats()
		if st.Mode != ModeDecrypt || st.Holds != 8 || st.Released != 8 || st.WrittenThrough != 1 || st.Unreadable != 0 || st.Undecodable != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// "without the vault passphrase the relay can hold back only metadata
// whose children are readable (no path obfuscation)": the same vault
// passes through unheld, and /status says so.
func TestVaultE2EEWithoutPassphrase(t *testing.T) {
	d := loadDump(t, "vault-dump-e2ee.json")
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		visible := pushVault(t, r, d)
		if len(visible) != 10 {
			t.Fatalf("visible before the chunks: %d documents, want all 10", len(visible))
		}
		st := r.s.Stats()
		if st.Mode != ModePassthroughObfuscated || st.Unreadable != 9 || st.Holds != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A wrong passphrase cannot decode the metadata: it passes through and
// is counted, nothing is lost.
func TestVaultE2EEWrongPassphrase(t *testing.T) {
	d := loadDump(t, "vault-dump-e2ee.json")
	d.FixedValues.Passphrase = "not-the-passphrase"
	codec := d.codec(t)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{Codec: codec})
		pushVault(t, r, d)
		if st := r.s.Stats(); st.Undecodable != 9 || st.Holds != 0 || st.Mode != ModeDecrypt {
			t.Fatalf("stats %+v", st)
		}
	})
}

// The plain vault needs no passphrase: its metadata is held.
func TestVaultPlainWithoutPassphrase(t *testing.T) {
	d := loadDump(t, "vault-dump-plain.json")
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		visible := pushVault(t, r, d)
		if !reflect.DeepEqual(visible, []string{"empty.md", "obsydian_livesync_version"}) {
			t.Fatalf("visible before the chunks: %v", visible)
		}
		if st := r.s.Stats(); st.Mode != ModeReadable || st.Holds != 8 || st.Released != 8 {
			t.Fatalf("stats %+v", st)
		}
	})
}
