//go:build js && wasm && !nos3

package main

import (
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/setupuri"
)

// The plugin's bucket settings map to the adapter's as the plugin uses
// them: the region as given, path style from forcePathStyle.
func TestS3FromSettings(t *testing.T) {
	s := setupuri.S3{Endpoint: " https://s3.example.org/ ", Bucket: "b", Prefix: "v/", Region: "auto", AccessKey: "a", SecretKey: "s", ForcePathStyle: true}
	want := minio.Config{Endpoint: "https://s3.example.org", Bucket: "b", Prefix: "v/", Region: "auto", AccessKey: "a", SecretKey: "s", PathStyle: true}
	got := s3FromSettings(s)
	if got.Endpoint != want.Endpoint || got.Bucket != want.Bucket || got.Prefix != want.Prefix || got.Region != want.Region ||
		got.AccessKey != want.AccessKey || got.SecretKey != want.SecretKey || got.PathStyle != want.PathStyle || got.VirtualHost {
		t.Errorf("s3FromSettings = %+v, want %+v", got, want)
	}
	s.ForcePathStyle = false
	if got := s3FromSettings(s); got.PathStyle || got.VirtualHost {
		t.Errorf("forcePathStyle false: PathStyle %v VirtualHost %v, want minio-go's choice", got.PathStyle, got.VirtualHost)
	}
}
