//go:build js && wasm && !nos3

package main

import (
	"strings"
	"syscall/js"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/setupuri"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// The S3 remote (a journal bucket); the build tag nos3 leaves it out,
// and minio-go with it.
func init() { remoteAdapters[remoteS3] = newS3Remote }

// newS3Remote is open's remote {kind: "s3", endpoint, bucket, accessKey,
// secretKey, region, prefix}, else the settings' bucket (remoteType
// "MINIO"). Requests go through the host's fetch: minio-go signs them
// and client's transport sends them.
func newS3Remote(r *remoteOptions, cfg *setupuri.Config, fetch js.Value) (vault.Remote, error) {
	client, err := hostClient(fetch)
	if err != nil {
		return nil, err
	}
	var mc minio.Config
	if r != nil {
		mc = minio.Config{Endpoint: r.endpoint, Bucket: r.bucket, Prefix: r.prefix, Region: r.region,
			AccessKey: r.accessKey, SecretKey: r.secretKey}
	} else {
		mc = s3FromSettings(cfg.S3)
	}
	// A page reaches the server only by URL; an endpoint without a
	// scheme is HTTPS.
	if !strings.Contains(mc.Endpoint, "://") {
		mc.Secure = true
	}
	mc.HTTPTransport = client.Transport
	remote, err := minio.NewRemote(mc, minio.RemoteOptions{})
	if err != nil {
		return nil, &optionsError{msg: err.Error(), err: err}
	}
	return remote, nil
}

// s3FromSettings maps the plugin's bucket settings to the adapter's:
// endpoint "https://host[:port]" (a trailing "/" dropped), bucket,
// bucketPrefix, region (sent as given: upstream's default "auto" is what
// the plugin signs with too), forcePathStyle (true: path-style requests;
// false: minio-go's choice, virtual-host-style for AWS S3 and a few other
// clouds, path-style for every other endpoint).
func s3FromSettings(s setupuri.S3) minio.Config {
	return minio.Config{Endpoint: strings.TrimRight(strings.TrimSpace(s.Endpoint), "/"), Bucket: s.Bucket, Prefix: s.Prefix,
		Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey, PathStyle: s.ForcePathStyle}
}
