//go:build js && wasm

package hosthttp

import (
	"net/http"
	"strings"
	"testing"
)

// TestRequestInitHeaders: headers with values are sent joined, a header
// with no value (net/http's replayable marker) is not sent.
func TestRequestInitHeaders(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/db/_revs_diff", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Accept", "application/json")
	req.Header.Add("Accept", "text/plain")
	req.Header["Idempotency-Key"] = nil
	init, err := requestInit(req)
	if err != nil {
		t.Fatal(err)
	}
	h := init.Get("headers")
	if got := h.Get("Content-Type").String(); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := h.Get("Accept").String(); got != "application/json, text/plain" {
		t.Errorf("Accept = %q", got)
	}
	if v := h.Get("Idempotency-Key"); !v.IsUndefined() {
		t.Errorf("Idempotency-Key sent as %q, want it left out", v.String())
	}
}
