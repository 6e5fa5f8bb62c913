package minio

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Location is a bucket as an s3:// URL names it (ParseURL): the Config
// that reaches it and the options the URL adds to it.
type Location struct {
	// Config holds Endpoint (host[:port], without a scheme), Secure,
	// Bucket, Prefix, Region, AccessKey, SecretKey (a password in the
	// URL), PathStyle and VirtualHost.
	Config
	// DirectFetch is the direct-fetch parameter
	// (RemoteOptions.DirectFetch).
	DirectFetch bool
	// CAFile is the ca-file parameter: the path of PEM certificates the
	// caller reads into Config.CACertPEM.
	CAFile string
}

// ParseURL parses a bucket's URL,
// s3://ACCESS_KEY[:SECRET_KEY]@host[:port]/bucket[/prefix]?region=…
// &tls=1&path-style=1&virtual-host=1&direct-fetch=1&ca-file=PATH. A flag
// parameter is 1, true, yes, on or empty for true, and 0, false, no or
// off for false; a repeated parameter takes its last value. The prefix
// is kept as given (with or without its trailing slash). BucketURL names
// the bucket again without credentials or parameters. No error repeats
// the secret key.
func ParseURL(raw string) (Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, fmt.Errorf("the bucket URL does not parse: %w", redactURLError(err))
	}
	if u.Scheme != "s3" {
		return Location{}, fmt.Errorf("the bucket URL's scheme %q: want s3", u.Scheme)
	}
	if u.Host == "" {
		return Location{}, errors.New("the bucket URL names no server: use s3://ACCESS_KEY@host:port/bucket/prefix/")
	}
	var l Location
	l.Endpoint = u.Host
	if u.User != nil {
		l.AccessKey = u.User.Username()
		l.SecretKey, _ = u.User.Password()
	}
	l.Bucket, l.Prefix, _ = strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if l.Bucket == "" {
		return Location{}, fmt.Errorf("the bucket URL s3://%s%s names no bucket: use s3://ACCESS_KEY@host:port/BUCKET/prefix/", u.Host, u.Path)
	}
	if err := l.setParams(u.Query()); err != nil {
		return Location{}, err
	}
	return l, nil
}

// setParams sets what the URL's query parameters say.
func (l *Location) setParams(q url.Values) error {
	for k, vs := range q {
		v := vs[len(vs)-1]
		var flag *bool
		switch k {
		case "region":
			l.Region = v
			continue
		case "ca-file":
			l.CAFile = v
			continue
		case "tls":
			flag = &l.Secure
		case "virtual-host":
			flag = &l.VirtualHost
		case "path-style":
			flag = &l.PathStyle
		case "direct-fetch":
			flag = &l.DirectFetch
		default:
			return fmt.Errorf("the bucket URL has an unknown parameter %q (known: region, tls, path-style, virtual-host, direct-fetch, ca-file)", k)
		}
		b, err := parseFlag(v)
		if err != nil {
			return fmt.Errorf("the bucket URL's %s=%q: %v", k, v, err)
		}
		*flag = b
	}
	if l.PathStyle && l.VirtualHost {
		return errors.New("the bucket URL sets both path-style and virtual-host")
	}
	return nil
}

// parseFlag reads a flag parameter.
func parseFlag(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on", "":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("want 1 or 0")
}

// redactURLError drops the URL from a url.Parse error, which may hold the
// secret key.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// EndpointURL is cfg's server as a URL without a trailing slash:
// http(s)://host[:port], the scheme from Secure for a host[:port]
// Endpoint.
func EndpointURL(cfg Config) string {
	ep := cfg.Endpoint
	if !strings.Contains(ep, "://") {
		scheme := "http://"
		if cfg.Secure {
			scheme = "https://"
		}
		ep = scheme + ep
	}
	return strings.TrimSuffix(ep, "/")
}
