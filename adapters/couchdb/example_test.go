package couchdb_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// Pull an end-to-end encrypted vault from a CouchDB server into a local
// replica and read a note from it. (Compiled, not run: it needs a server.)
func Example_pullEncryptedVault() {
	ctx := context.Background()
	db, err := couchdb.New(couchdb.Config{
		URL: "https://couch.example", Database: "vault",
		User: "alice", Password: os.Getenv("COUCHDB_PASSWORD"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// The vault's settings (normally the milestone's PREFERRED tweak
	// values) and the passphrase; the handshake reads the E2EE salt and
	// refuses a locked remote or mismatched settings with a typed error.
	settings := livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: os.Getenv("LIVESYNC_PASSPHRASE")}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{
		NodeID:   "my-device-01",
		Device:   negotiate.DeviceInfo{DeviceName: "laptop", AppVersion: "livesync-go"},
		Settings: settings.TweakValues(),
	})
	if err != nil {
		log.Fatal(err) // e.g. negotiate.ErrNodeLocked: "fetch the rebuilt remote first"
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		log.Fatal(err)
	}

	local, err := boltstore.Open("vault.db", boltstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	r, err := replicate.New(replicate.Config{Local: local, Remote: replicate.Transform(db, codec)})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Pull(ctx); err != nil { // checkpointed: a rerun resumes
		log.Fatal(err)
	}

	// The local replica holds plaintext documents; read one note.
	raw, err := local.Get(ctx, codec.DocID("Notes/Hello.md"), store.GetOptions{})
	if err != nil {
		log.Fatal(err)
	}
	doc, _ := livesync.ParseDoc(raw)
	meta, _ := livesync.ParseMeta(doc)
	data, err := livesync.ReadFile(meta, func(id string) (string, error) {
		got, err := local.GetChunks(ctx, []engine.ChunkID{id})
		if c, ok := got[id]; ok && err == nil {
			return c.Data, nil
		}
		return "", engine.ErrNotFound
	})
	fmt.Println(len(data), err)
}
