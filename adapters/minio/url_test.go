package minio

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw, id string
		want    Location
	}{
		{"s3://AK:in-config@10.0.0.2:9000/vaults?region=r&tls=1", "s3://10.0.0.2:9000/vaults",
			Location{Config: Config{Endpoint: "10.0.0.2:9000", Secure: true, Bucket: "vaults", Region: "r", AccessKey: "AK", SecretKey: "in-config"}}},
		{"s3://AK@127.0.0.1:9000/b/vault/?region=lsgo-local-1&virtual-host=0&direct-fetch=1", "s3://127.0.0.1:9000/b/vault/",
			Location{Config: Config{Endpoint: "127.0.0.1:9000", Bucket: "b", Prefix: "vault/", Region: "lsgo-local-1", AccessKey: "AK"}, DirectFetch: true}},
		{"s3://h:1/b/p?ca-file=/x.pem&path-style&tls=0&tls=yes", "s3://h:1/b/p",
			Location{Config: Config{Endpoint: "h:1", Secure: true, Bucket: "b", Prefix: "p", PathStyle: true}, CAFile: "/x.pem"}},
	} {
		l, err := ParseURL(tc.raw)
		if err != nil || !reflect.DeepEqual(l, tc.want) || BucketURL(l.Config) != tc.id {
			t.Errorf("ParseURL(%q) = %+v (%s), %v\nwant %+v (%s)", tc.raw, l, BucketURL(l.Config), err, tc.want, tc.id)
		}
	}
	for _, tc := range []struct{ raw, want string }{
		{"s3://AK:s3cret@/vaults/", "names no server"},
		{"s3://minio.example:9000/", "the bucket URL s3://minio.example:9000/ names no bucket"},
		{"s3://minio.example:9000/b/?tsl=1", `unknown parameter "tsl"`},
		{"s3://minio.example:9000/b/?tls=maybe", "want 1 or 0"},
		{"s3://minio.example:9000/b/?path-style=1&virtual-host=1", "both path-style and virtual-host"},
		{"http://AK:s3cret@h/b", `scheme "http"`},
		{"s3://AK:s3cret@h:port/b", "does not parse"},
	} {
		_, err := ParseURL(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q): %v, want an error saying %q without the secret", tc.raw, err, tc.want)
		}
	}
}

// FuzzParseURL: any URL gives a location or an error, never a panic; an
// error never repeats the secret key; BucketURL has no credentials and
// parses back to the same bucket.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"s3://AK@127.0.0.1:9000/vaults/my-vault/?region=lsgo-local-1&tls=1&virtual-host=0&direct-fetch=1",
		"s3://AK:s3cret-key@minio.example/b", "s3://h/", "s3://", "s3://h:1/b/p?ca-file=/x.pem&path-style",
		"s3://%zz@h/b", "s3://h/b/%2F?region=%00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		l, err := ParseURL(raw)
		if err != nil {
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) {
					t.Fatalf("%q: the error shows the secret: %v", raw, err)
				}
			}
			return
		}
		id := BucketURL(l.Config)
		if l.AccessKey != "" && strings.Contains(id, l.AccessKey+"@") {
			t.Fatalf("%q: the identity %q holds the access key", raw, id)
		}
		back, err := ParseURL(id)
		if err != nil || back.Bucket != l.Bucket || back.Prefix != l.Prefix || back.Endpoint != l.Endpoint || back.SecretKey != "" {
			t.Fatalf("%q: identity %q parses back as %+v, %v; want bucket %q prefix %q", raw, id, back, err, l.Bucket, l.Prefix)
		}
	})
}

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Endpoint: "127.0.0.1:9000"}, "http://127.0.0.1:9000"},
		{Config{Endpoint: "s3.example", Secure: true}, "https://s3.example"},
		{Config{Endpoint: "https://s3.example:9000/"}, "https://s3.example:9000"},
	} {
		if got := EndpointURL(tc.cfg); got != tc.want {
			t.Errorf("EndpointURL(%+v) = %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
