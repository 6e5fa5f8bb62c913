package livesync

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

type dumpRow struct {
	ID  string `json:"id"`
	Doc Doc    `json:"doc"`
}

type vaultDump struct {
	Settings struct {
		Effective negotiate.TweakValues `json:"effective"`
	} `json:"settings"`
	FixedValues struct {
		Passphrase       string `json:"passphrase"`
		PBKDF2SaltBase64 string `json:"pbkdf2SaltBase64"`
	} `json:"fixedValues"`
	Files []struct {
		VaultPath string `json:"vaultPath"`
		Source    string `json:"source"`
		Content   string `json:"content"`
		Size      int64  `json:"size"`
		SHA256    string `json:"sha256"`
		CTime     int64  `json:"ctime"`
		MTime     int64  `json:"mtime"`
		DocID     string `json:"docId"`
	} `json:"files"`
	Local struct {
		AllDocs []dumpRow `json:"allDocs"`
	} `json:"local"`
	Remote struct {
		AllDocs   []dumpRow `json:"allDocs"`
		LocalDocs []Doc     `json:"localDocs"`
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
		t.Fatalf("%s: %v", name, err)
	}
	return &d
}

func (d *vaultDump) settings(t testing.TB) Settings {
	t.Helper()
	s, err := FromTweakValues(Settings{Passphrase: d.FixedValues.Passphrase}, d.Settings.Effective)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (d *vaultDump) salt(t testing.TB) []byte {
	if d.FixedValues.PBKDF2SaltBase64 == "" {
		return nil
	}
	salt, err := base64.StdEncoding.DecodeString(d.FixedValues.PBKDF2SaltBase64)
	if err != nil {
		t.Fatal(err)
	}
	return salt
}

func inputBytes(t testing.TB, source, content string) []byte {
	t.Helper()
	if source == "" {
		return []byte(content)
	}
	b, err := os.ReadFile(testvectors.Path(source))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withoutRev drops _rev so documents compare by content.
func withoutRev(d Doc) Doc {
	c := d.Clone()
	delete(c, "_rev")
	delete(c, "_revisions")
	return c
}

// sameJSON compares two documents as generic JSON values.
func sameJSON(t testing.TB, what string, got, want Doc) {
	t.Helper()
	var g, w any
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wb, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, gb, wb)
	}
}

// replayRand yields queued bytes; tests queue the HKDF salt and the IV that
// upstream drew for a ciphertext, so our encryption reproduces it exactly.
type replayRand struct{ buf bytes.Buffer }

func (r *replayRand) Read(p []byte) (int, error) { return r.buf.Read(p) }

// queueFrom queues the HKDF salt then the IV of a "%=" ciphertext (binary
// layout iv(12) | hkdfSalt(32) | ct | tag): the order upstream draws them.
func (r *replayRand) queueFrom(t testing.TB, ciphertext string) {
	t.Helper()
	bin, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ciphertext, "%="))
	if err != nil || len(bin) < 44 {
		t.Fatalf("not a %%= ciphertext")
	}
	r.buf.Write(bin[12:44])
	r.buf.Write(bin[:12])
}

func newTestCodec(t testing.TB, d *vaultDump, rnd *replayRand) *Codec {
	t.Helper()
	// The master key is derived once per passphrase and salt and cached
	// process-wide by e2ee, so every codec of this test binary shares it.
	cfg := Config{Settings: d.settings(t), Salt: d.salt(t)}
	if rnd != nil {
		cfg.Rand = rnd
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func byID(rows []dumpRow) map[string]Doc {
	m := make(map[string]Doc, len(rows))
	for _, r := range rows {
		m[r.ID] = r.Doc
	}
	return m
}

// TestVaultDumpEncode stores the vault's input files with the dump's
// settings and checks that the local documents equal the real plugin's,
// and that the remote (CouchDB-side) form equals the real plugin's byte
// for byte, ciphertexts included, once the IV and HKDF salt upstream drew
// are replayed.
func TestVaultDumpEncode(t *testing.T) {
	for _, name := range []string{"vault-dump-plain.json", "vault-dump-e2ee.json"} {
		t.Run(name, func(t *testing.T) {
			d := loadDump(t, name)
			rnd := &replayRand{}
			c := newTestCodec(t, d, rnd)
			local, remote := byID(d.Local.AllDocs), byID(d.Remote.AllDocs)
			chunksChecked := 0
			for _, f := range d.Files {
				data := inputBytes(t, f.Source, f.Content)
				meta, chunks, err := c.FileDocs(f.VaultPath, data, f.CTime, f.MTime)
				if err != nil {
					t.Fatalf("%s: %v", f.VaultPath, err)
				}
				if meta.ID != f.DocID {
					t.Errorf("%s: id %q, want %q", f.VaultPath, meta.ID, f.DocID)
				}
				want, ok := local[meta.ID]
				if !ok {
					t.Fatalf("%s: no local document %q in the dump", f.VaultPath, meta.ID)
				}
				sameJSON(t, f.VaultPath+" local metadata", meta.Doc(), withoutRev(want))
				// Remote form of the metadata.
				wantRemote := remote[meta.ID]
				if p, _ := wantRemote.str("path"); strings.HasPrefix(p, encryptedPathPrefix) {
					rnd.queueFrom(t, p[len(encryptedPathPrefix):])
				}
				gotRemote, err := c.EncodeRemote(meta.Doc())
				if err != nil {
					t.Fatal(err)
				}
				sameJSON(t, f.VaultPath+" remote metadata", gotRemote, withoutRev(wantRemote))
				for _, ch := range chunks {
					sameJSON(t, f.VaultPath+" local chunk", ChunkDoc(ch), withoutRev(local[ch.ID]))
					wantRemote := remote[ch.ID]
					if wantRemote == nil {
						t.Fatalf("%s: chunk %s not on the remote", f.VaultPath, ch.ID)
					}
					if data, _ := wantRemote.str("data"); strings.HasPrefix(data, "%=") {
						rnd.queueFrom(t, data)
					}
					got, err := c.EncodeRemote(ChunkDoc(ch))
					if err != nil {
						t.Fatal(err)
					}
					sameJSON(t, f.VaultPath+" remote chunk", got, withoutRev(wantRemote))
					chunksChecked++
				}
			}
			if rnd.buf.Len() != 0 {
				t.Errorf("%d queued random bytes unused: fewer encryptions than upstream", rnd.buf.Len())
			}
			t.Logf("%d files, %d chunks matched", len(d.Files), chunksChecked)
		})
	}
}

// TestVaultDumpDecode reads every file back from the real plugin's
// CouchDB-side documents (decrypting where needed) and checks the bytes.
func TestVaultDumpDecode(t *testing.T) {
	for _, name := range []string{"vault-dump-plain.json", "vault-dump-e2ee.json"} {
		t.Run(name, func(t *testing.T) {
			d := loadDump(t, name)
			c := newTestCodec(t, d, nil)
			plain := map[string]Doc{}
			for _, r := range d.Remote.AllDocs {
				doc, err := c.DecodeRemote(r.Doc)
				if err != nil {
					t.Fatalf("%s: %v", r.ID, err)
				}
				plain[r.ID] = doc
			}
			get := func(id string) (string, error) {
				doc, ok := plain[id]
				if !ok {
					return "", engine.ErrNotFound
				}
				ch, err := ParseChunk(doc)
				return ch.Data, err
			}
			files := 0
			for id, doc := range plain {
				if !doc.IsFileDoc() {
					continue
				}
				meta, err := ParseMeta(doc)
				if err != nil {
					t.Fatal(err)
				}
				data, err := ReadFile(meta, get)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				found := false
				for _, f := range d.Files {
					if f.VaultPath == meta.Path {
						found = true
						sum := sha256.Sum256(data)
						if hex.EncodeToString(sum[:]) != f.SHA256 {
							t.Errorf("%s: bytes differ from the input", f.VaultPath)
						}
						if meta.MTime != f.MTime || meta.CTime != f.CTime || meta.ID != f.DocID {
							t.Errorf("%s: times or id differ", f.VaultPath)
						}
					}
				}
				if !found {
					t.Errorf("%s: path %q is not an input file", id, meta.Path)
				}
				files++
			}
			if files != len(d.Files) {
				t.Errorf("decoded %d files, want %d", files, len(d.Files))
			}
			// The decoded documents equal the plugin's local (plaintext) ones.
			for _, r := range d.Local.AllDocs {
				sameJSON(t, r.ID+" decoded", withoutRev(plain[r.ID]), withoutRev(r.Doc))
			}
		})
	}
}

func TestDecodeRemoteWrongPassphrase(t *testing.T) {
	d := loadDump(t, "vault-dump-e2ee.json")
	s := d.settings(t)
	s.Passphrase = "not-the-passphrase"
	c, err := New(Config{Settings: s, Salt: d.salt(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range d.Remote.AllDocs {
		if !docid.IsChunkID(r.ID) {
			continue
		}
		_, err := c.DecodeRemote(r.Doc)
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Stage != engine.StageDecrypt || ee.DocID != r.ID || !errors.Is(err, engine.ErrDecrypt) {
			t.Fatalf("wrong passphrase: got %v, want a decrypt error naming %s", err, r.ID)
		}
		if strings.Contains(err.Error(), "not-the-passphrase") {
			t.Fatal("error message contains the passphrase")
		}
		return
	}
	t.Fatal("no chunk in the dump")
}

// TestTweakValuesMatchPlugin: the tweak values we would register for the
// dump's settings agree with what the real plugin stored as PREFERRED.
func TestTweakValuesMatchPlugin(t *testing.T) {
	for _, name := range []string{"vault-dump-plain.json", "vault-dump-e2ee.json"} {
		d := loadDump(t, name)
		var ms *negotiate.Milestone
		for _, l := range d.Remote.LocalDocs {
			if l.ID() == negotiate.MilestoneDocID {
				b, _ := l.MarshalJSON()
				m, err := negotiate.ParseMilestone(b)
				if err != nil {
					t.Fatal(err)
				}
				ms = m
			}
		}
		if ms == nil {
			t.Fatalf("%s: no milestone", name)
		}
		pref := ms.TweakValues[negotiate.PreferredNode]
		if diffs := negotiate.TweakMismatch(pref, d.settings(t).TweakValues()); len(diffs) != 0 {
			t.Errorf("%s: our tweak values differ from the plugin's: %+v", name, diffs)
		}
		// Not only the must-match keys: the whole set the plugin writes,
		// recommended keys included, in its order.
		got, _ := json.Marshal(d.settings(t).TweakValues())
		want, _ := json.Marshal(pref)
		if string(got) != string(want) {
			t.Errorf("%s: our tweak values\n%s\nthe plugin's\n%s", name, got, want)
		}
		s, err := FromTweakValues(Settings{Passphrase: d.FixedValues.Passphrase}, pref)
		if err != nil || s != d.settings(t) {
			t.Errorf("%s: settings from PREFERRED %+v, want %+v (%v)", name, s, d.settings(t), err)
		}
	}
}

// TestDecodeRemoteBadCiphertext: altered, truncated and non-base64
// ciphertext in a chunk or in obfuscated metadata gives an *engine.Error
// that names the document and the decrypt stage, and never panics.
func TestDecodeRemoteBadCiphertext(t *testing.T) {
	d := loadDump(t, "vault-dump-e2ee.json")
	c := newTestCodec(t, d, nil)
	var chunkDoc, metaDoc Doc
	for _, r := range d.Remote.AllDocs {
		if chunkDoc == nil && docid.IsChunkID(r.ID) {
			chunkDoc = r.Doc
		}
		if metaDoc == nil && strings.HasPrefix(r.ID, "f:") {
			metaDoc = r.Doc
		}
	}
	flip := func(s string) string {
		b := []byte(s)
		i := len(b) / 2
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	cases := []struct {
		name   string
		doc    Doc
		field  string
		mutate func(string) string
		want   error
	}{
		{"chunk altered", chunkDoc, "data", flip, engine.ErrDecrypt},
		{"chunk truncated", chunkDoc, "data", func(s string) string { return s[:len(s)-8] }, engine.ErrDecrypt},
		{"chunk too short", chunkDoc, "data", func(s string) string { return s[:10] }, engine.ErrMalformed},
		{"chunk not base64", chunkDoc, "data", func(s string) string { return "%=***" + s[5:] }, engine.ErrMalformed},
		{"chunk unknown scheme", chunkDoc, "data", func(s string) string { return "[" + s }, engine.ErrUnsupported},
		{"metadata altered", metaDoc, "path", flip, engine.ErrDecrypt},
		{"metadata truncated", metaDoc, "path", func(s string) string { return s[:len(s)-8] }, engine.ErrDecrypt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc.Clone()
			v, _ := doc.str(tc.field)
			doc.setString(tc.field, tc.mutate(v))
			_, err := c.DecodeRemote(doc)
			var ee *engine.Error
			if !errors.As(err, &ee) || ee.DocID != doc.ID() || ee.Stage != engine.StageDecrypt || !errors.Is(err, tc.want) {
				t.Fatalf("got %v; want a decrypt-stage error naming %s wrapping %v", err, doc.ID(), tc.want)
			}
		})
	}
}
