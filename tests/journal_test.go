package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Journal sync against the real S3 server: the journals the plugin
// wrote, and journals the engine writes, received into fresh stores.

// journalClient is what a client knows after the pre-sync handshake of
// a journal bucket: the salt, the journal's cipher (nil for a plain
// vault), its epoch and the codec for the vault's settings.
type journalClient struct {
	salt   []byte
	cipher journal.Cipher
	epoch  string
	codec  *livesync.Codec
}

// connectJournal runs the handshake as a client does before a sync
// (minio.Bucket.HandshakeParams: the salt and the sync parameters, the
// milestone registered and judged, the journal epoch), then builds the
// journal's cipher from the settings and the salt
// (journalsync.CipherFor).
func connectJournal(t testing.TB, b *minio.Bucket, nodeID string, s livesync.Settings) journalClient {
	t.Helper()
	ctx := context.Background()
	hs, err := b.HandshakeParams(ctx, minio.HandshakeOptions{NodeID: nodeID, Settings: s.TweakValues()})
	if err != nil || hs.Verdict.Kind != negotiate.VerdictOK {
		t.Fatalf("handshake as %s: %v (verdict %v)", nodeID, err, hs.Verdict.Kind)
	}
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: hs.Salt})
	if err != nil {
		t.Fatal(err)
	}
	cipher, err := journalsync.CipherFor(s, hs.Salt)
	if err != nil {
		t.Fatal(err)
	}
	return journalClient{salt: hs.Salt, cipher: cipher, epoch: hs.Epoch, codec: codec}
}

// newJournal returns journalsync.New(cfg) or fails t.
func newJournal(t testing.TB, cfg journalsync.Config) *journalsync.Journal {
	t.Helper()
	j, err := journalsync.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// vectorSettings returns the effective settings of the vault dump of
// kind ("plain" or "e2ee", the same vault the journal vectors were made
// from) with its passphrase, and its input files.
func vectorSettings(t *testing.T, kind string) (livesync.Settings, map[string][]byte) {
	t.Helper()
	v := readVectorVault(t, kind)
	return dumpSettings(t, v.vaultDump, v.FixedValues.Passphrase), dumpInputs(t, v.vaultDump)
}

// writeFiles turns files into local documents with codec (chunks first,
// then the metadata, as the plugin writes them) and returns the stored
// metadata by path.
func writeFiles(t testing.TB, st store.Store, codec *livesync.Codec, files map[string][]byte) map[string]livesync.Meta {
	t.Helper()
	ctx := context.Background()
	out := map[string]livesync.Meta{}
	for _, path := range slices.Sorted(maps.Keys(files)) {
		m, chunks, err := codec.FileDocs(path, files[path], 1700000000000, 1700000001000)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutChunks(ctx, chunks); err != nil {
			t.Fatal(err)
		}
		doc, err := json.Marshal(m.Doc())
		if err != nil {
			t.Fatal(err)
		}
		if m.Rev, err = st.Put(ctx, doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[path] = m
	}
	return out
}

// currentMeta reads the winning metadata revision of path from st.
func currentMeta(t testing.TB, st store.Store, codec *livesync.Codec, path string) livesync.Meta {
	t.Helper()
	raw, err := st.Get(context.Background(), codec.DocID(path), store.GetOptions{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := livesync.ParseMeta(d)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// editFile writes a new revision of path with data, as a local edit.
func editFile(t testing.TB, st store.Store, codec *livesync.Codec, path string, data []byte) {
	t.Helper()
	old := currentMeta(t, st, codec, path)
	m, chunks, err := codec.FileDocs(path, data, old.CTime, old.MTime+1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutChunks(context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
	m.Rev = old.Rev
	doc, _ := json.Marshal(m.Doc())
	if _, err := st.Put(context.Background(), doc); err != nil {
		t.Fatalf("edit %s: %v", path, err)
	}
}

// deleteFile soft-deletes path (deleted: true, the body kept), as the
// plugin deletes a file.
func deleteFile(t testing.TB, st store.Store, codec *livesync.Codec, path string) {
	t.Helper()
	m := currentMeta(t, st, codec, path)
	m.Deleted = true
	m.MTime += 1000
	doc, _ := json.Marshal(m.Doc())
	if _, err := st.Put(context.Background(), doc); err != nil {
		t.Fatalf("delete %s: %v", path, err)
	}
}

// countingObjects counts the requests a journal makes to the real
// bucket (a decorator, the bucket itself is the server's).
type countingObjects struct {
	journalsync.Objects
	lists, gets, puts, bytesGot atomic.Int64
}

func (c *countingObjects) List(ctx context.Context, after string) ([]string, error) {
	c.lists.Add(1)
	return c.Objects.List(ctx, after)
}

func (c *countingObjects) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	b, err := c.Objects.Get(ctx, key)
	c.bytesGot.Add(int64(len(b)))
	return b, err
}

func (c *countingObjects) Put(ctx context.Context, key string, body []byte) error {
	c.puts.Add(1)
	return c.Objects.Put(ctx, key, body)
}

func (c *countingObjects) reset() {
	c.lists.Store(0)
	c.gets.Store(0)
	c.puts.Store(0)
	c.bytesGot.Store(0)
}

// packKeys lists the packs of b.
func packKeys(t testing.TB, b *minio.Bucket) []string {
	t.Helper()
	keys, err := b.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// bucketRecords opens every pack of b and returns its records by key
// (journal.Record.Key: the id of a chunk, id-rev of a document).
func bucketRecords(t testing.TB, b *minio.Bucket, c journal.Cipher) map[string]journal.Record {
	t.Helper()
	out := map[string]journal.Record{}
	for _, k := range packKeys(t, b) {
		recs, err := b.GetPack(context.Background(), k, c)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		for _, r := range recs {
			if _, dup := out[r.Key()]; dup {
				t.Errorf("%s: record %s is in two packs", k, r.Key())
			}
			out[r.Key()] = r
		}
	}
	return out
}

// sameRecords fails t unless got holds the records of want: the same
// keys, the same chunk data, and documents equal as JSON values (same
// fields, _revisions included).
func sameRecords(t *testing.T, got, want map[string]journal.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d records, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("record %s is missing", k)
		case w.IsChunk() != g.IsChunk():
			t.Errorf("record %s: chunk %v, want %v", k, g.IsChunk(), w.IsChunk())
		case w.IsChunk() && g.ChunkData != w.ChunkData:
			t.Errorf("chunk %s: data differs", k)
		case !w.IsChunk():
			var wv, gv map[string]any
			if err := json.Unmarshal(w.Doc, &wv); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(g.Doc, &gv); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gv, wv) {
				t.Errorf("document %s differs:\n got %s\nwant %s", k, g.Doc, w.Doc)
			}
		}
	}
}

// journalManifest is the part of a journal vector's manifest.json the
// tests read.
type journalManifest struct {
	Settings struct {
		Effective negotiate.TweakValues `json:"effective"`
	} `json:"settings"`
	FixedValues struct {
		Passphrase       string `json:"passphrase"`
		PBKDF2SaltBase64 string `json:"pbkdf2SaltBase64"`
	} `json:"fixedValues"`
	Files []struct {
		Key         string `json:"key"`
		Size        int    `json:"size"`
		SHA256      string `json:"sha256"`
		UploadOrder int    `json:"uploadOrder"`
	} `json:"files"`
}

func readJournalManifest(t *testing.T, dir string) journalManifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m journalManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].UploadOrder < m.Files[j].UploadOrder })
	return m
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestJournalInteropVectors: the objects the real
// plugin uploaded for a vault (plain, and E2EE V2 with path obfuscation)
// are put into a bucket byte for byte under their original names (the
// vectors' bucket prefix is empty), in the plugin's upload order. A
// client handshakes as a real one would (for E2EE the plugin's salt comes
// back from the sync-parameters object), receives the journal into a
// fresh store (memory and bbolt) and reads every input file back byte
// for byte. Then the engine sends that store to a second bucket: its
// packs hold the same records (chunk data, documents with their
// _revisions) as the plugin's, and a fresh store receiving them rebuilds
// the same files.
func TestJournalInteropVectors(t *testing.T) {
	for _, kind := range []string{"plain", "e2ee"} {
		t.Run(kind, func(t *testing.T) {
			_, inputs := vectorSettings(t, "plain") // the journals' vault
			dir := filepath.Join(vectors, "journal", kind)
			man := readJournalManifest(t, dir)
			fresh, e := freshBucket(t)
			b := s3Bucket(t, e, fresh.Name(), "", nil)
			ctx := ctxT(t)
			var packs []string
			for _, f := range man.Files {
				body, err := os.ReadFile(filepath.Join(dir, f.Key))
				if err != nil {
					t.Fatal(err)
				}
				if len(body) != f.Size || sha256Hex(body) != f.SHA256 {
					t.Fatalf("%s: the vector file differs from its manifest", f.Key)
				}
				if err := b.PutObject(ctx, f.Key, body); err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(f.Key, journal.PackKeySuffix) {
					packs = append(packs, f.Key)
				}
			}
			for _, f := range man.Files {
				got, err := b.Get(ctx, f.Key)
				if err != nil || sha256Hex(got) != f.SHA256 {
					t.Fatalf("%s on the server: %d bytes, %v; want the vector's bytes", f.Key, len(got), err)
				}
			}
			if keys := packKeys(t, b); !slices.Equal(keys, packs) {
				t.Fatalf("List = %v, want the vector packs %v", keys, packs)
			}

			s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: man.FixedValues.Passphrase}, man.Settings.Effective)
			if err != nil {
				t.Fatal(err)
			}
			cl := connectJournal(t, b, "go-receiver", s)
			if s.Encrypt != (kind == "e2ee") {
				t.Fatalf("settings say encrypt=%v for the %s vectors", s.Encrypt, kind)
			}
			if kind == "e2ee" && base64.StdEncoding.EncodeToString(cl.salt) != man.FixedValues.PBKDF2SaltBase64 {
				t.Fatal("the handshake returned a salt other than the plugin's")
			}
			plugin := bucketRecords(t, b, cl.cipher)

			for _, sk := range stores {
				t.Run(sk.name, func(t *testing.T) {
					ctx := ctxT(t)
					st := sk.open(t)
					j := newJournal(t, journalsync.Config{Local: st, Remote: b, Cipher: cl.cipher, Epoch: cl.epoch})
					res, err := j.Receive(ctx)
					if err != nil {
						t.Fatal(err)
					}
					// 251 + 50 records: 9 metadata documents, 292 chunks.
					if res.PacksReceived != 2 || res.DocsWritten != 9 || res.ChunksReceived != 292 || len(res.Quarantined) != 0 || res.Rejected != 0 {
						t.Fatalf("receive: %+v", res)
					}
					sameFiles(t, readLocalFiles(t, st), inputs)
					// Nothing received is sent back.
					if res, err := j.Sync(ctx); err != nil || res.PacksReceived != 0 || res.PacksSent != 0 {
						t.Fatalf("sync after receive: %+v, %v; want nothing received or sent", res, err)
					}
					if keys := packKeys(t, b); !slices.Equal(keys, packs) {
						t.Fatalf("after the sync the bucket holds %v, want the vector packs only", keys)
					}

					// The engine's packs of the same store.
					out, _ := freshBucket(t)
					send := newJournal(t, journalsync.Config{Local: st, Remote: out, Cipher: cl.cipher, Epoch: cl.epoch})
					sres, err := send.Send(ctx)
					if err != nil || sres.RecordsSent != 301 || sres.PacksSent != 2 {
						t.Fatalf("send to a second bucket: %+v, %v; want 301 records in 2 packs", sres, err)
					}
					sameRecords(t, bucketRecords(t, out, cl.cipher), plugin)
					st2 := newMemoryStore(t)
					back := newJournal(t, journalsync.Config{Local: st2, Remote: out, Cipher: cl.cipher, Epoch: cl.epoch})
					if res, err := back.Receive(ctx); err != nil || res.DocsWritten != 9 || res.ChunksReceived != 292 {
						t.Fatalf("receive the engine's packs: %+v, %v", res, err)
					}
					sameFiles(t, readLocalFiles(t, st2), inputs)
				})
			}
		})
	}
}

// TestJournalTwoDevices (the engine's own packs): device
// 1 writes the vault's files into its store and syncs to a fresh bucket
// with E2EE and path obfuscation; the bucket then holds only ciphertext,
// and its packs open under the pack rules. Device 2 handshakes (same
// salt, same epoch), syncs into a fresh bbolt store and reads every file
// byte for byte, with the revisions device 1 wrote, and sends nothing
// back. Device 2 then edits one file and deletes another; its sync sends
// exactly those revisions in one pack, and device 1's sync receives them
// and sends nothing.
func TestJournalTwoDevices(t *testing.T) {
	s, inputs := vectorSettings(t, "e2ee")
	if !s.Encrypt || !s.PathObfuscation {
		t.Fatalf("the e2ee vault's settings: encrypt %v, obfuscation %v", s.Encrypt, s.PathObfuscation)
	}
	b, _ := freshBucket(t)
	ctx := ctxT(t)

	d1 := connectJournal(t, b, "device-1", s)
	st1 := newMemoryStore(t)
	metas := writeFiles(t, st1, d1.codec, inputs)
	chunkIDs := map[string]bool{}
	for _, m := range metas {
		for _, id := range m.Children {
			chunkIDs[id] = true
		}
	}
	j1 := newJournal(t, journalsync.Config{Local: st1, Remote: b, Cipher: d1.cipher, Epoch: d1.epoch})
	res, err := j1.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.PacksReceived != 0 || res.PacksSent != 2 || res.RecordsSent != len(inputs)+len(chunkIDs) {
		t.Fatalf("device 1 sync: %+v; want %d records in 2 packs (upstream's 251-record packs)", res, len(inputs)+len(chunkIDs))
	}
	twoDevicesCheckPacks(t, b, d1, inputs, chunkIDs)

	d2 := connectJournal(t, b, "device-2", s)
	if !bytes.Equal(d2.salt, d1.salt) || d2.epoch != d1.epoch {
		t.Fatal("device 2's handshake gave another salt or epoch")
	}
	st2 := newBoltStore(t)
	j2 := newJournal(t, journalsync.Config{Local: st2, Remote: b, Cipher: d2.cipher, Epoch: d2.epoch})
	res, err = j2.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.PacksReceived != 2 || res.DocsWritten != len(inputs) || res.ChunksReceived != len(chunkIDs) || res.PacksSent != 0 || len(res.Quarantined) != 0 {
		t.Fatalf("device 2 sync: %+v", res)
	}
	sameFiles(t, readLocalFiles(t, st2), inputs)
	for path, m := range localFileMetas(t, st2) {
		if w := metas[path]; m.ID != w.ID || m.Rev != w.Rev {
			t.Errorf("%s: device 2 holds %s@%s, device 1 wrote %s@%s", path, m.ID, m.Rev, w.ID, w.Rev)
		}
	}

	want := maps.Clone(inputs)
	want["tiny.md"] = []byte("tiny, edited on device 2\n")
	delete(want, "notes/large.md")
	editFile(t, st2, d2.codec, "tiny.md", want["tiny.md"])
	deleteFile(t, st2, d2.codec, "notes/large.md")
	res, err = j2.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newChunks := 0
	for _, id := range currentMeta(t, st2, d2.codec, "tiny.md").Children {
		if !chunkIDs[id] {
			newChunks++
		}
	}
	if res.PacksReceived != 0 || res.PacksSent != 1 || res.RecordsSent != 2+newChunks {
		t.Fatalf("device 2 sync after the edits: %+v; want 1 pack of %d records", res, 2+newChunks)
	}
	res, err = j1.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.PacksReceived != 1 || res.DocsWritten != 2 || res.PacksSent != 0 {
		t.Fatalf("device 1 sync after device 2's edits: %+v; want 1 pack, 2 documents, nothing sent", res)
	}
	sameFiles(t, readLocalFiles(t, st1), want)
	sameFiles(t, readLocalFiles(t, st2), want)
	if m := currentMeta(t, st1, d1.codec, "notes/large.md"); !m.Deleted {
		t.Error("device 1 does not see the deletion")
	}

	// Quiet: both devices sync again and nothing moves.
	for i, j := range []*journalsync.Journal{j1, j2} {
		if res, err := j.Sync(ctx); err != nil || res.PacksReceived != 0 || res.PacksSent != 0 {
			t.Errorf("device %d idle sync: %+v, %v", i+1, res, err)
		}
	}
	if n := len(packKeys(t, b)); n != 3 {
		t.Errorf("bucket holds %d packs, want 3 (2 from device 1, 1 from device 2)", n)
	}
}

// twoDevicesCheckPacks checks device 1's two packs in b: only
// ciphertext (no file name in the clear, no pack opens without the key),
// every chunk referenced by a file, every document with _rev and
// _revisions.
func twoDevicesCheckPacks(t *testing.T, b *minio.Bucket, d1 journalClient, inputs map[string][]byte, chunkIDs map[string]bool) {
	ctx := ctxT(t)
	packs := packKeys(t, b)
	if len(packs) != 2 {
		t.Fatalf("bucket holds packs %v, want 2", packs)
	}
	for _, k := range packs {
		raw, err := b.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		for path := range inputs {
			if bytes.Contains(raw, []byte(filepath.Base(path))) {
				t.Errorf("%s shows the file name %q in the clear", k, path)
			}
		}
		if _, err := journal.Open(k, raw, nil, 0); err == nil {
			t.Errorf("%s opens without the key", k)
		}
	}
	recs := bucketRecords(t, b, d1.cipher)
	for key, r := range recs {
		if r.IsChunk() {
			if !chunkIDs[r.ID] {
				t.Errorf("pack holds chunk %s that no file references", r.ID)
			}
			continue
		}
		var d struct {
			Rev       string `json:"_rev"`
			Revisions struct {
				Start int      `json:"start"`
				IDs   []string `json:"ids"`
			} `json:"_revisions"`
		}
		if err := json.Unmarshal(r.Doc, &d); err != nil || d.Rev == "" || d.Revisions.Start != 1 || len(d.Revisions.IDs) != 1 {
			t.Errorf("document record %s: %s (%v); want _rev and _revisions", key, r.Doc, err)
		}
	}
}
