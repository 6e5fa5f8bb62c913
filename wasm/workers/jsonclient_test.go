//go:build !js

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// jsonClient sends JSON requests to one server as one user, for tests.
type jsonClient struct {
	t                   *testing.T
	url, user, password string
}

// do sends body (JSON, unless nil) and returns the status and the answer.
func (c jsonClient) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.SetBasicAuth(c.user, c.password)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res.StatusCode, b
}

// ok is do for a request that must succeed (2xx).
func (c jsonClient) ok(method, path string, body any) []byte {
	c.t.Helper()
	code, b := c.do(method, path, body)
	if code/100 != 2 {
		c.t.Fatalf("%s %s%s: %d %s", method, c.url, path, code, b)
	}
	return b
}
