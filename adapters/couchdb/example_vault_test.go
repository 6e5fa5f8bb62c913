package couchdb_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// A vault client over a replica on disk, synced live with a CouchDB
// database the plugin set up, printing what arrives. (Compiled, not run:
// it needs a server.)
func ExampleNewRemote() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := boltstore.Open("vault.db", boltstore.Options{Options: store.Options{Name: "local"}})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	v, err := vault.Open(ctx, st, vault.Options{Passphrase: os.Getenv("LIVESYNC_PASSPHRASE")})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	remote, err := couchdb.NewRemote(couchdb.Config{
		URL: "https://couch.example", Database: "vault",
		User: "alice", Password: os.Getenv("COUCHDB_PASSWORD"),
	}, couchdb.RemoteOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer remote.Close()
	link, err := v.Attach(ctx, remote, vault.AttachOptions{})
	if err != nil {
		log.Fatal(err) // a wrong passphrase, a locked remote, another vault's settings…
	}
	v.Watch(ctx, func(e vault.Event) {
		switch e.Kind {
		case vault.FileCreated, vault.FileChanged:
			if data, err := v.Read(ctx, e.Path); err == nil {
				fmt.Printf("%s: %d bytes\n", e.Path, len(data))
			}
		case vault.FileHeld:
			fmt.Printf("%s: waiting for %d chunks\n", e.Path, e.Missing)
		}
	})
	// Live until ctx ends; a held note is released when its chunks arrive.
	if _, err := v.Sync(ctx, link, vault.SyncOptions{Live: true}); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
