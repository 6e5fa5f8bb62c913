package minio

import "testing"

func TestBucketURL(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Endpoint: "127.0.0.1:9000", Bucket: "b"}, "s3://127.0.0.1:9000/b"},
		{Config{Endpoint: "https://s3.example", Bucket: "b", Prefix: "vault/"}, "s3://s3.example/b/vault/"},
	} {
		if got := BucketURL(tc.cfg); got != tc.want {
			t.Errorf("BucketURL(%+v) = %q, want %q", tc.cfg, got, tc.want)
		}
	}
	r, err := NewRemote(Config{Endpoint: "127.0.0.1:9000", Bucket: "vault"}, RemoteOptions{ID: "s3://x/b", DirectFetch: true})
	if err != nil || r.ID() != "s3://x/b" || !r.DirectFetch() || r.Objects() == nil || r.Endpoint() != nil {
		t.Fatalf("NewRemote: %v %+v", err, r)
	}
}
