//go:build !js

package main

import "net/http"

// upstreamTransport sends a run's upstream requests (natively: the
// tests).
func upstreamTransport() http.RoundTripper { return http.DefaultTransport }
