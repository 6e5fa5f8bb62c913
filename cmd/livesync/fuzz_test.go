package main

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// FuzzRemoteURL: any remote argument gives a spec or a usage error, never
// a panic; an error never repeats a secret given in the URL; a secret is
// never accepted from the command line. (minio.FuzzParseURL checks that a
// bucket's identity parses back to the same bucket.)
func FuzzRemoteURL(f *testing.F) {
	for _, s := range []string{
		"s3://AK@127.0.0.1:9000/vaults/my-vault/?region=lsgo-local-1&tls=1&virtual-host=0&direct-fetch=1",
		"s3://AK:s3cret-key@minio.example/b", "s3://h/", "s3://", "s3://h:1/b/p?ca-file=/x.pem&path-style",
		"https://alice@couch.example:6984/vault", "http://a:pw@h/db", "s3://%zz@h/b", "s3://h/b/%2F?region=%00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		spec, err := resolveRemote(&config{}, raw)
		if err != nil {
			if !errors.As(err, new(usageError)) {
				t.Fatalf("%q: %T %v, want a usage error", raw, err, err)
			}
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) {
					t.Fatalf("%q: the error shows the secret: %v", raw, err)
				}
			}
			return
		}
		if spec.s3.SecretKey != "" || spec.couch.Password != "" {
			t.Fatalf("%q: a secret accepted from the command line", raw)
		}
		if strings.Contains(spec.String(), "@") && spec.s3.AccessKey != "" && strings.Contains(spec.String(), spec.s3.AccessKey+"@") {
			t.Fatalf("%q: the identity %q holds the access key", raw, spec.String())
		}
	})
}

// FuzzHeldRecord: whatever the _local record of held files holds, hunt
// lists the held files, never an error or a panic.
func FuzzHeldRecord(f *testing.F) {
	f.Add(`{"docs":{"a.md":{"rev":"1-x","since":"2024-05-06T07:08:09Z","source":"http://h/db"}}}`)
	f.Add(`{"docs":null}`)
	f.Add(`[]`)
	f.Add(`{"docs":{"a":{"since":"yesterday"}}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		st, err := store.NewMemory(store.Options{Name: "f"})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		if err := st.PutLocal(ctx, vault.HeldRecordID, []byte(raw)); err != nil {
			return // not a JSON object: the store refuses it
		}
		v, err := vault.Open(ctx, st, vault.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if _, err := v.Held(ctx); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
	})
}
