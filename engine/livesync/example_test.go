package livesync_test

import (
	"fmt"
	"log"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// A plugin author turns a file into LiveSync documents, sends them to a
// remote in the remote form, and reads a file back from documents.
func Example() {
	// Settings{} is a new vault's default; encryption needs the passphrase
	// and the remote's salt (from its sync parameters document).
	salt := make([]byte, 32)
	codec, err := livesync.New(livesync.Config{
		Settings: livesync.Settings{Encrypt: true, Passphrase: "test"},
		Salt:     salt,
	})
	if err != nil {
		log.Fatal(err)
	}

	// File -> local documents: chunks first, then the metadata.
	meta, chunks, err := codec.FileDocs("Notes/Hello.md", []byte("# Hello\n"), 1700000000000, 1700000000000)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.ID, meta.Type, meta.Size, meta.Children)

	// Local -> remote form: chunk data is encrypted and flagged e_.
	remote, err := codec.EncodeRemote(livesync.ChunkDoc(chunks[0]))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("encrypted on the remote:", string(remote["e_"]))

	// Remote -> local form, then reassemble the file.
	local, err := codec.DecodeRemote(remote)
	if err != nil {
		log.Fatal(err)
	}
	got := map[string]string{}
	if c, err := livesync.ParseChunk(local); err == nil {
		got[c.ID] = c.Data
	}
	data, err := livesync.ReadFile(meta, func(id string) (string, error) {
		if d, ok := got[id]; ok {
			return d, nil
		}
		return "", engine.ErrNotFound
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", data)
	// Output:
	// notes/hello.md plain 8 [h:+hh1lfufz7xkh]
	// encrypted on the remote: true
	// "# Hello\n"
}
