package vault_test

import (
	"context"
	"fmt"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

// Two devices share a vault through a remote: the laptop writes a note
// and pushes it, the phone pulls only the metadata, sees the note held,
// and reads it, which fetches its chunks from the remote.
func Example() {
	ctx := context.Background()
	remote := vaulttest.NewRemote("mem://couchdb/notes") // a CouchDB database in a real program
	defer remote.Close()

	// The laptop: a new end-to-end encrypted vault.
	lst, _ := store.NewMemory(store.Options{Name: "laptop"})
	defer lst.Close()
	laptop, err := vault.Open(ctx, lst, vault.Options{Settings: &livesync.Settings{Encrypt: true, Passphrase: "correct horse"}})
	if err != nil {
		panic(err)
	}
	defer laptop.Close()
	link, err := laptop.Attach(ctx, remote, vault.AttachOptions{Create: true})
	if err != nil {
		panic(err)
	}
	if _, err := laptop.Write(ctx, "notes/today.md", []byte("# Today\nbuy milk\n"), vault.WriteOptions{}); err != nil {
		panic(err)
	}
	if _, err := laptop.Push(ctx, link, vault.SyncOptions{}); err != nil {
		panic(err)
	}

	// The phone: an empty replica takes the vault's settings from the
	// remote; the passphrase is asked for when needed.
	pst, _ := store.NewMemory(store.Options{Name: "phone"})
	defer pst.Close()
	phone, err := vault.Open(ctx, pst, vault.Options{})
	if err != nil {
		panic(err)
	}
	defer phone.Close()
	stop := phone.Watch(ctx, func(e vault.Event) {
		if e.Kind.IsFile() {
			fmt.Println(e.Kind, e.Path)
		}
	})
	defer stop()
	plink, err := phone.Attach(ctx, remote, vault.AttachOptions{Passphrase: func() (string, error) { return "correct horse", nil }})
	if err != nil {
		panic(err)
	}
	if _, err := phone.Pull(ctx, plink, vault.SyncOptions{MetadataOnly: true}); err != nil {
		panic(err)
	}
	text, err := phone.Read(ctx, "notes/today.md")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// held notes/today.md
	// released notes/today.md
	// "# Today\nbuy milk\n"
}
