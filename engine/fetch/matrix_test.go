package fetch_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/fetch"
)

// TestPolicyMatrix covers every row of the retrieval policy matrix of
// upstream's docs/design_docs/chunk_retrieval_and_waiting.md (the
// "Either" rows once per value of useOnlyLocalChunk).
// Obligation: "every row in the retrieval policy matrix".
func TestPolicyMatrix(t *testing.T) {
	type row struct {
		remote       string
		waitForReady bool
		useOnlyLocal bool
		direct       bool // "Direct fetch"
		wait         bool // "Wait for observed producer"
	}
	rows := []row{
		// Dispatch on-demand fetch and finish at its per-identifier claim boundary.
		{"CouchDB", false, false, true, true},
		// Accept an active finite replication or dispatch direct fetch.
		{"CouchDB", true, false, true, true},
		// Return immediately after the local miss.
		{"CouchDB", false, true, false, false},
		// Wait for an already-active finite replication; otherwise return unavailable.
		{"CouchDB", true, true, false, true},
		{"MinIO", false, false, false, false},
		{"MinIO", false, true, false, false},
		{"MinIO", true, false, false, true},
		{"MinIO", true, true, false, true},
		{"P2P", false, false, false, false},
		{"P2P", false, true, false, false},
		{"P2P", true, false, false, true},
		{"P2P", true, true, false, true},
	}
	for _, rw := range rows {
		name := fmt.Sprintf("%s/waitForReady=%v/useOnlyLocalChunk=%v", rw.remote, rw.waitForReady, rw.useOnlyLocal)
		canDirect := rw.remote == "CouchDB" && !rw.useOnlyLocal
		if got := fetch.PolicyFor(canDirect, rw.waitForReady); got != (fetch.Policy{Dispatch: rw.direct, Wait: rw.wait}) {
			t.Errorf("%s: PolicyFor = %+v", name, got)
		}
		opts := fetch.ReadOptions{WaitForReady: rw.waitForReady}

		// No producer observable, and the remote lacks the chunk.
		t.Run(name+"/idle", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, fetch.Config{}, newSource(canDirect))
				res := r.read(ids("h:x"), opts).wait(t)
				var want error
				var at time.Duration
				switch {
				case rw.direct: // first omission, 2 s retry, terminal
					want, at = fetch.ErrRemoteMissing, 2*time.Second
				case rw.wait:
					want = fetch.ErrNoProducer
				default:
					want = fetch.ErrLocalOnly
				}
				if !errors.Is(res[0].Err, want) || r.now() != at {
					t.Errorf("result %v at %v, want %v at %v", res[0].Err, r.now(), want, at)
				}
				if n := len(r.src.getCalls()); (n > 0) != rw.direct {
					t.Errorf("%d requests, direct fetch %v", n, rw.direct)
				}
			})
		})

		// A finite replication is active and brings the chunk at 40 s.
		t.Run(name+"/replicating", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, fetch.Config{}, newSource(canDirect))
				end := r.finite()
				rd := r.read(ids("h:x"), opts)
				time.Sleep(40 * time.Second)
				r.local.store("h:x")
				end()
				res := rd.wait(t)
				if rw.wait {
					if !res[0].OK || rd.at != 40*time.Second {
						t.Errorf("result %+v at %v, want the chunk at 40s", res[0], rd.at)
					}
				} else if !errors.Is(res[0].Err, fetch.ErrLocalOnly) || rd.at != 0 {
					t.Errorf("result %+v at %v, want ErrLocalOnly at once", res[0], rd.at)
				}
				if n := len(r.src.getCalls()); (n > 0) != rw.direct {
					t.Errorf("%d requests, direct fetch %v", n, rw.direct)
				}
			})
		})
	}
}
