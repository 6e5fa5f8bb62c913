package tests

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// syncVault is the code of the README section "Syncing a vault with a
// MinIO or S3 bucket": one journal sync of the bbolt replica at dbPath
// with the bucket of cfg. TestJournalReadmeExample runs it against the
// test server.
func syncVault(ctx context.Context, cfg minio.Config, settings livesync.Settings, nodeID, dbPath string) (journalsync.Result, error) {
	bucket, err := minio.New(cfg)
	if err != nil {
		return journalsync.Result{}, err
	}
	// The pre-sync handshake: the vault's salt and sync parameters (the
	// salt is written only when the bucket provably has none), then the
	// milestone (a locked bucket or mismatched settings come back as
	// typed errors that say what to do).
	hs, err := bucket.HandshakeParams(ctx, minio.HandshakeOptions{NodeID: nodeID, Settings: settings.TweakValues()})
	if err != nil {
		return journalsync.Result{}, err
	}
	// The packs' cipher: E2EE with the passphrase and the bucket's salt in
	// the vault's algorithm; nil (plain packs) when encryption is off.
	cipher, err := journalsync.CipherFor(settings, hs.Salt)
	if err != nil {
		return journalsync.Result{}, err
	}
	local, err := boltstore.Open(dbPath, boltstore.Options{})
	if err != nil {
		return journalsync.Result{}, err
	}
	defer local.Close()
	j, err := journalsync.New(journalsync.Config{
		Local:  local,
		Remote: bucket,
		Cipher: cipher,
		Epoch:  hs.Epoch, // notices a wiped and rebuilt bucket
	})
	if err != nil {
		return journalsync.Result{}, err
	}
	res, err := j.Sync(ctx) // receive every new pack, then send local changes
	if err != nil {
		return res, err // e.g. a wrong passphrase: engine.ErrDecrypt, nothing quarantined
	}
	for _, q := range res.Quarantined { // packs that do not open are set aside, the rest arrives
		log.Printf("pack %s set aside at stage %s: %s", q.Key, q.Stage, q.Err)
	}
	return res, nil
}

// Syncing a vault with a MinIO bucket: the README's example (compiled,
// not run: it names a server that does not exist here).
func Example_journalSync() {
	cfg := minio.Config{
		Endpoint:  "https://minio.example.com:9000",
		Bucket:    "obsidian",
		Prefix:    "my-vault/", // LiveSync's "bucket prefix"
		AccessKey: os.Getenv("S3_ACCESS_KEY"),
		SecretKey: os.Getenv("S3_SECRET_KEY"),
		Region:    "us-east-1",
		PathStyle: true,
	}
	settings := livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: os.Getenv("LIVESYNC_PASSPHRASE")}
	res, err := syncVault(context.Background(), cfg, settings, "my-laptop", "vault.db")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("received", res.PacksReceived, "packs, sent", res.PacksSent)
}

// TestJournalReadmeExample runs the README's syncVault against the test
// server: a laptop whose bbolt replica holds a note syncs it to the
// bucket, and a phone with an empty replica syncs and holds the note,
// byte for byte.
func TestJournalReadmeExample(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	cfg := e.config(b.Name(), b.Prefix())
	settings := livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: "readme-passphrase"}
	dir := t.TempDir()
	laptop, phone := filepath.Join(dir, "laptop.db"), filepath.Join(dir, "phone.db")
	note := map[string][]byte{"Notes/Hello.md": []byte("# Hello from the laptop\n")}

	codec, err := livesync.New(livesync.Config{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(laptop, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, st, codec, note)
	st.Close()

	if res, err := syncVault(ctx, cfg, settings, "laptop", laptop); err != nil || res.PacksSent != 1 || res.RecordsSent != 2 {
		t.Fatalf("laptop: %+v, %v; want one pack of the note and its chunk", res, err)
	}
	if res, err := syncVault(ctx, cfg, settings, "phone", phone); err != nil || res.PacksReceived != 1 || res.DocsWritten != 1 || res.PacksSent != 0 {
		t.Fatalf("phone: %+v, %v; want the laptop's pack", res, err)
	}
	st, err = boltstore.Open(phone, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sameFiles(t, readLocalFiles(t, st), note)
}
