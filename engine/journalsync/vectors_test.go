package journalsync

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path"
	"runtime"
	"testing"

	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// vectorMasterHex is the V2 master key of the journal/e2ee vectors:
// PBKDF2-HMAC-SHA256 of the vectors' passphrase with the bucket's salt
// (see engine/journal/e2ee_test.go). Natively the test derives it and
// checks this value; under js/wasm it uses the value directly.
const vectorMasterHex = "20f8d19196f01a02a44949a9f0c4d0244c2d28dacb9291d76639eece314e9fcf"

func vectorCipher(t testing.TB) *e2ee.Cipher {
	t.Helper()
	master, err := hex.DecodeString(vectorMasterHex)
	if err != nil {
		t.Fatal(err)
	}
	key, err := e2ee.KeyFromMaster(master)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "js" {
		var params struct {
			PBKDF2Salt string `json:"pbkdf2salt"`
		}
		if err := json.Unmarshal(readVector(t, "journal/e2ee/"+journal.SyncParametersKey), &params); err != nil {
			t.Fatal(err)
		}
		salt, err := base64.StdEncoding.DecodeString(params.PBKDF2Salt)
		if err != nil {
			t.Fatal(err)
		}
		derived, err := e2ee.DeriveKey("vector-passphrase", salt)
		if err != nil || !derived.Equal(key) {
			t.Fatalf("vectorMasterHex is not the derived key (%v)", err)
		}
	}
	return e2ee.NewWithKey(key, e2ee.Options{})
}

func readVector(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testvectors.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// vectorInputs returns the vault's files (vault path → bytes) that the
// journal vectors were made from, as vault-dump-plain.json lists them.
func vectorInputs(t testing.TB) map[string][]byte {
	t.Helper()
	var dump struct {
		Files []struct {
			VaultPath string `json:"vaultPath"`
			Source    string `json:"source"`
		} `json:"files"`
	}
	if err := json.Unmarshal(readVector(t, "vault-dump-plain.json"), &dump); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range dump.Files {
		out[f.VaultPath] = readVector(t, f.Source)
	}
	if len(out) != 9 {
		t.Fatalf("%d input files", len(out))
	}
	return out
}

// vectorBucket puts every object of journal/<dir> into a bucket under
// prefix, as the library uploaded them.
func vectorBucket(t testing.TB, dir, prefix string) *enginetest.MemObjects {
	t.Helper()
	bucket := newMemObjects(prefix)
	entries, err := os.ReadDir(testvectors.Path(path.Join("journal", dir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "manifest.json" {
			continue
		}
		bucket.Set(prefix+e.Name(), readVector(t, path.Join("journal", dir, e.Name())))
	}
	return bucket
}

// TestVectors receives the journals the real library wrote (plain, and
// E2EE with path obfuscation) into an empty store and reads every input
// file back byte for byte; nothing received is sent back.
func TestVectors(t *testing.T) {
	inputs := vectorInputs(t)
	for _, dir := range []string{"plain", "e2ee"} {
		t.Run(dir, func(t *testing.T) {
			ctx := t.Context()
			bucket := vectorBucket(t, dir, "my-vault/")
			var c journal.Cipher
			if dir == "e2ee" {
				c = vectorCipher(t)
			}
			st := newStore(t)
			j := newJournal(t, Config{Local: st, Remote: bucket, Cipher: c})
			res, err := j.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// 251 + 50 records: 9 metadata documents, 292 chunks.
			if res.PacksReceived != 2 || res.DocsWritten != 9 || res.ChunksReceived != 292 || len(res.Quarantined) != 0 {
				t.Fatalf("%+v", res)
			}
			files := readFiles(t, st)
			if len(files) != len(inputs) {
				t.Errorf("%d files read back, %d inputs", len(files), len(inputs))
			}
			for p, want := range inputs {
				if got, ok := files[p]; !ok || !bytes.Equal(got, want) {
					t.Errorf("%s: %d bytes read back (found %v), want %d", p, len(got), ok, len(want))
				}
			}
			res, err = j.Send(ctx)
			if err != nil || res.PacksSent != 0 || res.Skipped != 301 {
				t.Fatalf("send after receive: %+v %v", res, err)
			}
			// The chunk source answers from the index built while receiving.
			res2, err := j.ChunkSource().FetchChunks(ctx, []string{"h:+2632jpxmmdvjb", "h:z6ah0ntngt3t"})
			if err != nil || len(res2.Found) != 1 || len(res2.Missing) != 1 {
				t.Fatalf("fetch: %+v %v", res2, err)
			}
		})
	}
}
