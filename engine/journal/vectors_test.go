package journal_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// manifest is the manifest.json of journal/plain and journal/e2ee
// (engine/testdata/vectors/README.md, "journal/").
type manifest struct {
	FixedValues struct {
		Passphrase       string `json:"passphrase"`
		PBKDF2SaltBase64 string `json:"pbkdf2SaltBase64"`
	} `json:"fixedValues"`
	Files []manifestFile `json:"files"`
}

type manifestFile struct {
	Key              string `json:"key"`
	Mime             string `json:"mime"`
	Size             int    `json:"size"`
	SHA256           string `json:"sha256"`
	DecryptedSize    int    `json:"decryptedSize"`
	DecryptedSHA256  string `json:"decryptedSha256"`
	EncryptionLayout *struct {
		IVHex                  string `json:"ivHex"`
		HKDFSaltHex            string `json:"hkdfSaltHex"`
		CiphertextAndTagLength int    `json:"ciphertextAndTagLength"`
	} `json:"encryptionLayout"`
	InflatedSize   int    `json:"inflatedSize"`
	InflatedSHA256 string `json:"inflatedSha256"`
	Records        int    `json:"records"`
}

func (f manifestFile) isPack() bool { return f.InflatedSize > 0 }

func readFile(name string) ([]byte, error) { return os.ReadFile(testvectors.Path(name)) }

func readVector(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := readFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func readManifest(tb testing.TB, dir string) manifest {
	tb.Helper()
	var m manifest
	if err := json.Unmarshal(readVector(tb, path.Join("journal", dir, "manifest.json")), &m); err != nil {
		tb.Fatal(err)
	}
	packs := 0
	for _, f := range m.Files {
		if f.isPack() {
			packs++
		}
	}
	if packs == 0 {
		tb.Fatalf("%s/manifest.json lists no packs", dir)
	}
	return m
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func decodedName(dir, key string) string {
	return path.Join("journal", dir, "decoded", strings.TrimSuffix(key, ".gz"))
}

// TestVectorObjects checks every object of both folders against its
// manifest entry (size, sha256, mime) and the key helpers against the
// object names.
func TestVectorObjects(t *testing.T) {
	for _, dir := range []string{"plain", "e2ee"} {
		m := readManifest(t, dir)
		for _, f := range m.Files {
			obj := readVector(t, path.Join("journal", dir, f.Key))
			if len(obj) != f.Size || sum(obj) != f.SHA256 {
				t.Errorf("%s/%s: size %d sha %s, manifest %d %s", dir, f.Key, len(obj), sum(obj), f.Size, f.SHA256)
			}
			ms, ok := journal.ParsePackKey("", f.Key)
			if ok != f.isPack() || journal.IsPackListingCandidate(f.Key) != f.isPack() {
				t.Errorf("%s/%s: ParsePackKey ok=%v, listing candidate=%v, want %v", dir, f.Key, ok, journal.IsPackListingCandidate(f.Key), f.isPack())
			}
			if ok && journal.PackKey("", ms) != f.Key {
				t.Errorf("%s: PackKey(%d) = %q", f.Key, ms, journal.PackKey("", ms))
			}
			wantMime := "application/json"
			if f.isPack() {
				wantMime = "application/octet-stream"
			}
			if f.Mime != wantMime {
				t.Errorf("%s/%s: mime %q", dir, f.Key, f.Mime)
			}
			if !f.isPack() && f.Key != journal.MilestoneKey && f.Key != journal.SyncParametersKey {
				t.Errorf("%s/%s: unexpected fixed object", dir, f.Key)
			}
		}
	}
}

// TestPlainVectorPacks: inflating each plain pack gives decoded/*.jsonl
// byte for byte; decoding gives the manifest's record count; re-encoding
// the records gives the identical payload; Open agrees; Deflate/Inflate
// round-trips.
func TestPlainVectorPacks(t *testing.T) {
	m := readManifest(t, "plain")
	for _, f := range m.Files {
		if !f.isPack() {
			continue
		}
		t.Run(f.Key, func(t *testing.T) {
			obj := readVector(t, path.Join("journal/plain", f.Key))
			want := readVector(t, decodedName("plain", f.Key))
			payload, err := journal.Inflate(obj, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(payload, want) {
				t.Fatalf("inflated payload differs from decoded/ (%d vs %d bytes)", len(payload), len(want))
			}
			if len(payload) != f.InflatedSize || sum(payload) != f.InflatedSHA256 {
				t.Fatalf("inflated size/sha256 differ from the manifest")
			}
			recs, err := journal.DecodePack(payload)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != f.Records {
				t.Fatalf("%d records, manifest says %d", len(recs), f.Records)
			}
			checkRecordShapes(t, recs)
			again, err := journal.EncodePack(recs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, payload) {
				t.Fatalf("re-encoded payload differs at byte %d", firstDiff(again, payload))
			}
			opened, err := journal.Open(f.Key, obj, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !equalRecords(opened, recs) {
				t.Fatal("Open and DecodePack disagree")
			}
			z, err := journal.Deflate(payload)
			if err != nil {
				t.Fatal(err)
			}
			back, err := journal.Inflate(z, int64(len(payload)))
			if err != nil || !bytes.Equal(back, payload) {
				t.Fatalf("Deflate/Inflate round trip failed: %v", err)
			}
		})
	}
}

// checkRecordShapes checks what every upstream pack satisfies: chunk ids
// start "h:", documents carry _rev and _revisions, and the escaped form
// was exercised (the vault has CRLF and multi-line notes).
func checkRecordShapes(t *testing.T, recs []journal.Record) {
	t.Helper()
	chunks, multiLine := 0, 0
	for _, r := range recs {
		if r.IsChunk() {
			chunks++
			if !strings.HasPrefix(r.ID, "h:") {
				t.Errorf("chunk id %q", r.ID)
			}
			if strings.ContainsAny(r.ChunkData, "\r\n") {
				multiLine++
			}
			if r.Key() != r.ID {
				t.Errorf("chunk key %q", r.Key())
			}
			continue
		}
		var d struct {
			ID        string          `json:"_id"`
			Rev       string          `json:"_rev"`
			Revisions json.RawMessage `json:"_revisions"`
		}
		if err := json.Unmarshal(r.Doc, &d); err != nil || d.ID != r.ID || d.Rev == "" || d.Revisions == nil {
			t.Errorf("document %q: %+v %v", r.ID, d, err)
		}
		if r.Key() != r.ID+"-"+d.Rev {
			t.Errorf("document key %q", r.Key())
		}
	}
	if chunks == 0 || multiLine == 0 || chunks == len(recs) {
		t.Errorf("expected chunks, multi-line chunks and documents: %d chunks, %d multi-line, %d records", chunks, multiLine, len(recs))
	}
}

// TestE2EEVectorStructure checks the encrypted packs without decrypting:
// the V2 binary layout iv(12) || hkdfSalt(32) || ciphertext || tag(16)
// matches the manifest; the decoded payloads decode to the manifest's
// record counts and re-encode byte for byte; without a cipher the
// ciphertext is refused at the decode stage; the sync parameters carry
// the fixed salt.
func TestE2EEVectorStructure(t *testing.T) {
	m := readManifest(t, "e2ee")
	for _, f := range m.Files {
		if !f.isPack() {
			continue
		}
		t.Run(f.Key, func(t *testing.T) {
			obj := readVector(t, path.Join("journal/e2ee", f.Key))
			l := f.EncryptionLayout
			if l == nil {
				t.Fatal("no encryptionLayout")
			}
			if hex.EncodeToString(obj[:12]) != l.IVHex || hex.EncodeToString(obj[12:44]) != l.HKDFSaltHex {
				t.Error("iv / hkdf salt not at the V2 offsets")
			}
			if len(obj)-44 != l.CiphertextAndTagLength || l.CiphertextAndTagLength-16 != f.DecryptedSize {
				t.Errorf("layout lengths: object %d, ct+tag %d, decrypted %d", len(obj), l.CiphertextAndTagLength, f.DecryptedSize)
			}
			payload := readVector(t, decodedName("e2ee", f.Key))
			if len(payload) != f.InflatedSize || sum(payload) != f.InflatedSHA256 {
				t.Fatal("decoded/ differs from the manifest")
			}
			recs, err := journal.DecodePack(payload)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != f.Records {
				t.Fatalf("%d records, manifest says %d", len(recs), f.Records)
			}
			checkRecordShapes(t, recs)
			again, err := journal.EncodePack(recs)
			if err != nil || !bytes.Equal(again, payload) {
				t.Fatalf("re-encoding differs: %v", err)
			}
			_, err = journal.Open(f.Key, obj, nil, 1<<20)
			var ee *engine.Error
			if !errors.As(err, &ee) || ee.Stage != engine.StageDecode || ee.DocID != f.Key {
				t.Fatalf("Open of ciphertext without cipher: %v", err)
			}
		})
	}
	var params struct {
		ID              string `json:"_id"`
		Type            string `json:"type"`
		ProtocolVersion int    `json:"protocolVersion"`
		PBKDF2Salt      string `json:"pbkdf2salt"`
	}
	if err := json.Unmarshal(readVector(t, "journal/e2ee/"+journal.SyncParametersKey), &params); err != nil {
		t.Fatal(err)
	}
	salt, err := base64.StdEncoding.DecodeString(params.PBKDF2Salt)
	if err != nil || len(salt) != 32 || params.PBKDF2Salt != m.FixedValues.PBKDF2SaltBase64 ||
		params.Type != "sync-parameters" || params.ProtocolVersion != 2 {
		t.Fatalf("sync parameters: %+v %v", params, err)
	}
}

func equalRecords(a, b []journal.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].ChunkData != b[i].ChunkData || !bytes.Equal(a[i].Doc, b[i].Doc) ||
			(a[i].Doc == nil) != (b[i].Doc == nil) {
			return false
		}
	}
	return true
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
