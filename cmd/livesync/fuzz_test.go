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
// a panic; an error never repeats a secret given in the URL; a bucket's
// identity has no credentials and parses back to the same bucket.
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
		if spec.kind != "s3" {
			return
		}
		id := spec.String()
		if strings.Contains(id, "@") && spec.s3.accessKey != "" && strings.Contains(id, spec.s3.accessKey+"@") {
			t.Fatalf("%q: the identity %q holds the access key", raw, id)
		}
		if spec.s3.secretKey != "" {
			t.Fatalf("%q: a secret key accepted from the command line", raw)
		}
		back, err := resolveRemote(&config{}, id)
		if err != nil || back.s3.bucket != spec.s3.bucket || back.s3.prefix != spec.s3.prefix || back.s3.endpoint != spec.s3.endpoint {
			t.Fatalf("%q: identity %q parses back as %+v, %v; want bucket %q prefix %q", raw, id, back.s3, err, spec.s3.bucket, spec.s3.prefix)
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
