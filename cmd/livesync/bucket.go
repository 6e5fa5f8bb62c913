package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/minio"
)

// journalChunkSize is customChunkSize of a new vault on a journal bucket:
// the object-storage preset of the plugin's setup URI generator.
const journalChunkSize = 10

// s3Spec is an S3 journal bucket as named by an s3:// URL or by a
// [remote.NAME] table with kind = "s3".
type s3Spec struct {
	endpoint    string // host[:port]
	tls         bool   // HTTPS
	bucket      string
	prefix      string // LiveSync's bucket prefix, as given (may be empty)
	region      string // "" asks the server
	accessKey   string
	secretKey   string // only from an s3:// URL in the configuration file
	caFile      string
	pathStyle   bool
	virtualHost bool
	directFetch bool
}

// id is the bucket's URL without credentials or options:
// s3://host:port/bucket/prefix.
func (s s3Spec) id() *url.URL {
	p := "/" + s.bucket
	if s.prefix != "" {
		p += "/" + s.prefix
	}
	return &url.URL{Scheme: "s3", Host: s.endpoint, Path: p}
}

// parseS3URL parses s3://ACCESS_KEY@host:port/bucket/prefix/?region=…&tls=1
// &virtual-host=1&path-style=1&direct-fetch=1&ca-file=PATH. A secret key
// in a URL given on the command line is refused: other users see it in
// the process list.
func parseS3URL(u *url.URL, fromConfig bool) (remoteSpec, error) {
	spec := remoteSpec{kind: "s3"}
	var s s3Spec
	if u.Host == "" {
		return spec, usageError{"the bucket URL names no server: use s3://ACCESS_KEY@host:port/bucket/prefix/"}
	}
	s.endpoint = u.Host
	if u.User != nil {
		s.accessKey = u.User.Username()
		if p, ok := u.User.Password(); ok {
			if !fromConfig {
				return spec, usageError{"the bucket URL holds a secret key, which other users can see in the process list; " +
					"give it with $LIVESYNC_S3_SECRET_KEY, --password-file or the prompt instead (or --password-insecure-arg if you must)"}
			}
			s.secretKey = p
		}
	}
	s.bucket, s.prefix, _ = strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if s.bucket == "" {
		return spec, usageError{fmt.Sprintf("the bucket URL s3://%s%s names no bucket: use s3://ACCESS_KEY@host:port/BUCKET/prefix/", u.Host, u.Path)}
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var flag *bool
		switch k {
		case "region":
			s.region = v
			continue
		case "ca-file":
			s.caFile = v
			continue
		case "tls":
			flag = &s.tls
		case "virtual-host":
			flag = &s.virtualHost
		case "path-style":
			flag = &s.pathStyle
		case "direct-fetch":
			flag = &s.directFetch
		default:
			return spec, usageError{fmt.Sprintf("the bucket URL has an unknown parameter %q (known: region, tls, path-style, virtual-host, direct-fetch, ca-file)", k)}
		}
		b, err := parseBool(v)
		if err != nil {
			return spec, usageError{fmt.Sprintf("the bucket URL's %s=%q: %v", k, v, err)}
		}
		*flag = b
	}
	if s.pathStyle && s.virtualHost {
		return spec, usageError{"the bucket URL sets both path-style and virtual-host"}
	}
	spec.s3, spec.url = s, s.id()
	return spec, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on", "":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("want 1 or 0")
}

// s3SpecFromConfig returns the spec of a [remote.NAME] table with kind =
// "s3" and endpoint/bucket keys.
func s3SpecFromConfig(c s3Config) (remoteSpec, error) {
	s := s3Spec{bucket: c.Bucket, prefix: c.Prefix, region: c.Region, accessKey: c.AccessKey, caFile: c.CAFile,
		pathStyle: c.PathStyle, virtualHost: c.VirtualHost, directFetch: c.DirectFetch}
	s.endpoint = strings.TrimSuffix(c.Endpoint, "/")
	scheme := ""
	if i := strings.Index(s.endpoint, "://"); i >= 0 {
		scheme, s.endpoint = s.endpoint[:i], s.endpoint[i+3:]
	}
	switch scheme {
	case "":
		if c.TLS != nil {
			s.tls = *c.TLS
		}
	case "http", "https":
		s.tls = scheme == "https"
		if c.TLS != nil && *c.TLS != s.tls {
			return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint is %s:// but tls = %v", scheme, *c.TLS)}
		}
	default:
		return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint %q: want host:port or http(s)://host:port", c.Endpoint)}
	}
	if s.endpoint == "" || strings.ContainsAny(s.endpoint, "/?#@") {
		return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint %q: want host:port or http(s)://host:port", c.Endpoint)}
	}
	return remoteSpec{kind: "s3", s3: s, url: s.id()}, nil
}

// bucketConfig resolves the secret key of spec and returns the adapter's
// configuration of its bucket.
func (e *cliEnv) bucketConfig(spec remoteSpec, f commonFlags) (minio.Config, error) {
	s := spec.s3
	secret := s.secretKey
	if f.passwordArg != "" || f.passwordFile != "" || secret == "" {
		prompt := ""
		if s.accessKey != "" {
			prompt = "Secret key for " + s.accessKey + " at " + s.endpoint + ": "
		}
		v, err := e.secret(secretSource{what: "secret key", insecureArg: f.passwordArg, file: f.passwordFile,
			envVar: "LIVESYNC_S3_SECRET_KEY", configFile: spec.cfg.SecretKeyFile, prompt: prompt})
		if err != nil {
			return minio.Config{}, err
		}
		if v != "" {
			secret = v
		}
	}
	switch {
	case s.accessKey != "" && secret == "":
		return minio.Config{}, usageError{"no secret key for the access key " + s.accessKey + ": set LIVESYNC_S3_SECRET_KEY, use --password-file or the remote's secret_key_file, or run on a terminal to be asked"}
	case s.accessKey == "" && secret != "":
		return minio.Config{}, usageError{"a secret key but no access key: name it in the URL (s3://ACCESS_KEY@host:port/bucket/) or as access_key in the configuration"}
	}
	var ca []byte
	if s.caFile != "" {
		var err error
		if ca, err = os.ReadFile(s.caFile); err != nil {
			return minio.Config{}, usageError{fmt.Sprintf("reading the CA file: %v", err)}
		}
	}
	return minio.Config{Endpoint: s.endpoint, Secure: s.tls, Bucket: s.bucket, Prefix: s.prefix,
		AccessKey: s.accessKey, SecretKey: secret, Region: s.region, PathStyle: s.pathStyle, VirtualHost: s.virtualHost,
		CACertPEM: ca}, nil
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
