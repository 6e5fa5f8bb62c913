package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/minio"
)

// s3SpecFromConfig returns the spec of a [remote.NAME] table with kind =
// "s3" and endpoint/bucket keys.
func s3SpecFromConfig(c s3Config) (remoteSpec, error) {
	l := minio.Location{Config: minio.Config{Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region, AccessKey: c.AccessKey,
		PathStyle: c.PathStyle, VirtualHost: c.VirtualHost}, CAFile: c.CAFile, DirectFetch: c.DirectFetch}
	endpoint := strings.TrimSuffix(c.Endpoint, "/")
	scheme := ""
	if i := strings.Index(endpoint, "://"); i >= 0 {
		scheme, endpoint = endpoint[:i], endpoint[i+3:]
	}
	switch scheme {
	case "":
		if c.TLS != nil {
			l.Secure = *c.TLS
		}
	case "http", "https":
		l.Secure = scheme == "https"
		if c.TLS != nil && *c.TLS != l.Secure {
			return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint is %s:// but tls = %v", scheme, *c.TLS)}
		}
	default:
		return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint %q: want host:port or http(s)://host:port", c.Endpoint)}
	}
	if endpoint == "" || strings.ContainsAny(endpoint, "/?#@") {
		return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint %q: want host:port or http(s)://host:port", c.Endpoint)}
	}
	l.Endpoint = endpoint
	return remoteSpec{kind: "s3", s3: l, id: minio.BucketURL(l.Config)}, nil
}

// bucketConfig resolves the secret key of spec and returns the adapter's
// configuration of its bucket.
func (e *cliEnv) bucketConfig(spec remoteSpec, f commonFlags) (minio.Config, error) {
	cfg := spec.s3.Config
	if f.passwordArg != "" || f.passwordFile != "" || cfg.SecretKey == "" {
		prompt := ""
		if cfg.AccessKey != "" {
			prompt = "Secret key for " + cfg.AccessKey + " at " + cfg.Endpoint + ": "
		}
		v, err := e.secret(secretSource{what: "secret key", insecureArg: f.passwordArg, file: f.passwordFile,
			envVar: "LIVESYNC_S3_SECRET_KEY", configFile: spec.cfg.SecretKeyFile, prompt: prompt})
		if err != nil {
			return minio.Config{}, err
		}
		if v != "" {
			cfg.SecretKey = v
		}
	}
	switch {
	case cfg.AccessKey != "" && cfg.SecretKey == "":
		return minio.Config{}, usageError{"no secret key for the access key " + cfg.AccessKey + ": set LIVESYNC_S3_SECRET_KEY, use --password-file or the remote's secret_key_file, or run on a terminal to be asked"}
	case cfg.AccessKey == "" && cfg.SecretKey != "":
		return minio.Config{}, usageError{"a secret key but no access key: name it in the URL (s3://ACCESS_KEY@host:port/bucket/) or as access_key in the configuration"}
	}
	if spec.s3.CAFile != "" {
		var err error
		if cfg.CACertPEM, err = os.ReadFile(spec.s3.CAFile); err != nil {
			return minio.Config{}, usageError{fmt.Sprintf("reading the CA file: %v", err)}
		}
	}
	return cfg, nil
}

// openBucket resolves the secret key of spec and opens its bucket (no
// request is made).
func (e *cliEnv) openBucket(spec remoteSpec, f commonFlags) (*minio.Bucket, error) {
	cfg, err := e.bucketConfig(spec, f)
	if err != nil {
		return nil, err
	}
	b, err := minio.New(cfg)
	if err != nil {
		return nil, bucketConfigError(err)
	}
	return b, nil
}
