package livesync

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestJournalVectors opens the journal packs the real plugin uploaded
// (plain and E2EE), rebuilds every file byte for byte, and checks that
// storing the input files with the journal's settings gives the same
// metadata documents.
func TestJournalVectors(t *testing.T) {
	dump := loadDump(t, "vault-dump-plain.json") // the same 9 input files
	for _, kind := range []string{"plain", "e2ee"} {
		t.Run(kind, func(t *testing.T) {
			dir := testvectors.Path("journal/" + kind)
			var manifest struct {
				Settings struct {
					Effective negotiate.TweakValues `json:"effective"`
				} `json:"settings"`
				FixedValues struct {
					Passphrase string `json:"passphrase"`
					Salt       string `json:"pbkdf2SaltBase64"`
				} `json:"fixedValues"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &manifest); err != nil {
				t.Fatal(err)
			}
			s, err := FromTweakValues(Settings{Passphrase: manifest.FixedValues.Passphrase}, manifest.Settings.Effective)
			if err != nil {
				t.Fatal(err)
			}
			var cipher journal.Cipher
			if s.Encrypt {
				salt, _ := base64.StdEncoding.DecodeString(manifest.FixedValues.Salt)
				cipher = e2ee.New(s.Passphrase, salt, e2ee.Options{})
			}
			chunks := map[string]string{}
			metas := map[string]Doc{}
			entries, _ := os.ReadDir(dir)
			packs := 0
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), "-docs.jsonl.gz") {
					continue
				}
				obj, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				recs, err := journal.Open(e.Name(), obj, cipher, 0)
				if err != nil {
					t.Fatalf("%s: %v", e.Name(), err)
				}
				packs++
				for _, r := range recs {
					if r.IsChunk() {
						chunks[r.ID] = r.ChunkData
						continue
					}
					d, err := ParseDoc(r.Doc)
					if err != nil {
						t.Fatal(err)
					}
					if d.IsFileDoc() {
						metas[d.ID()] = d
					}
				}
			}
			if packs != 2 || len(metas) != len(dump.Files) {
				t.Fatalf("%d packs, %d files; want 2 and %d", packs, len(metas), len(dump.Files))
			}
			codec, err := New(Config{Settings: s})
			if err != nil {
				t.Fatal(err)
			}
			get := func(id string) (string, error) {
				if d, ok := chunks[id]; ok {
					return d, nil
				}
				return "", engine.ErrNotFound
			}
			for _, f := range dump.Files {
				want := inputBytes(t, f.Source, f.Content)
				meta, _, err := codec.FileDocs(f.VaultPath, want, f.CTime, f.MTime)
				if err != nil {
					t.Fatal(err)
				}
				doc, ok := metas[meta.ID]
				if !ok {
					t.Fatalf("%s: %s not in the journal", f.VaultPath, meta.ID)
				}
				sameJSON(t, f.VaultPath+" journal metadata", meta.Doc(), withoutRev(doc))
				m, err := ParseMeta(doc)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ReadFile(m, get)
				if err != nil {
					t.Fatalf("%s: %v", f.VaultPath, err)
				}
				sum := sha256.Sum256(got)
				if hex.EncodeToString(sum[:]) != f.SHA256 {
					t.Errorf("%s: rebuilt bytes differ from the input", f.VaultPath)
				}
			}
		})
	}
}
