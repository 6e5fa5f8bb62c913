package negotiate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
)

// The handshake over a remote's port: the first client creates the salt,
// the next one reads it; a rebuilt (locked) remote refuses a node it does
// not accept until that node joins.
func ExampleHandshake() {
	ctx := context.Background()
	port := negotiatetest.NewMemPort(false) // couchdb.DB, minio.Bucket.Negotiate() in real use
	opts := func(node string) negotiate.HandshakeOptions {
		return negotiate.HandshakeOptions{NodeID: node, Range: negotiate.CouchDBChunkRange, Settings: negotiate.NewVaultTweaks()}
	}
	a, _ := negotiate.Handshake(ctx, port, opts("laptop"))
	b, _ := negotiate.Handshake(ctx, port, opts("phone"))
	fmt.Println("one salt:", string(a.Salt) == string(b.Salt))

	_, _ = negotiate.Lock(ctx, port, "laptop", negotiate.CouchDBChunkRange, false, time.Now())
	_, err := negotiate.Handshake(ctx, port, opts("phone"))
	fmt.Println("phone refused:", errors.Is(err, negotiate.ErrNodeLocked))

	join := opts("phone")
	join.AllowJoin = true // after fetching the rebuilt remote into an empty replica
	r, err := negotiate.Handshake(ctx, port, join)
	fmt.Println("phone joined:", err == nil, r.Verdict.Kind == negotiate.VerdictLocked)
	// Output:
	// one salt: true
	// phone refused: true
	// phone joined: true true
}
