package main

import (
	"net/http"
	"strings"
	"testing"
)

// An approval by POST must declare a JSON body: a cross-site form or
// plain-text POST, which a browser sends with an admin's session without
// asking first, approves nobody.
func TestP2PApprovePostNeedsJSON(t *testing.T) {
	rn := startP2P(t, p2pTestHost(t).ID(), p2pTestHost(t).ID())
	stranger := p2pTestHost(t).ID()
	path := "/_p2p/notes/family/peers/" + stranger.String()
	req, err := http.NewRequest(http.MethodPost, rn.url+path, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.SetBasicAuth(rn.user, rn.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a plain-text POST: %d; want 415", resp.StatusCode)
	}
	for _, g := range rn.r.p2p.groups {
		if _, ok := g.book.Allow().Device(stranger); ok {
			t.Fatal("a plain-text POST approved the peer")
		}
	}
	rn.admin("POST", path, map[string]string{"device": "tablet"}, http.StatusOK)
}
