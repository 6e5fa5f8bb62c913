//go:build !js

package p2p

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// FuzzChunksAnswer feeds the chunk client's answer decoding arbitrary
// frames: it never panics, and an answer it accepts accounts for every
// id asked, exactly once, and for nothing else.
func FuzzChunksAnswer(f *testing.F) {
	for _, r := range []chunksResponse{
		{Status: statusOK, Found: []wireChunk{{ID: "h:a", Data: "x", Rev: "1-a"}}, Missing: []engine.ChunkID{"h:b"}},
		{Status: statusOK, Found: []wireChunk{{ID: "h:a"}, {ID: "h:a"}}},
		{Status: statusOK, Missing: []engine.ChunkID{"h:a", "h:c"}},
		{Status: statusRefused, Error: "no"},
	} {
		b, _ := json.Marshal(r)
		f.Add(frameOf(b))
	}
	ids := []engine.ChunkID{"h:a", "h:b"}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var resp chunksResponse
		if _, err := readJSON(bytes.NewReader(stream), MaxFrameSize, &resp); err != nil {
			return
		}
		res, err := checkAnswer(ids, resp)
		if err != nil {
			return
		}
		seen := map[engine.ChunkID]int{}
		for _, c := range res.Found {
			seen[c.ID]++
		}
		for _, id := range res.Missing {
			seen[id]++
		}
		if len(seen) != len(ids) || seen["h:a"] != 1 || seen["h:b"] != 1 {
			t.Fatalf("accepted an answer that does not account for %v once each: %+v", ids, res)
		}
	})
}
