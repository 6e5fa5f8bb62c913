package negotiate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

const (
	vectorNode     = "vector-node-0001"
	vectorSalt     = "Lqn/qHNB1vkpycUB7XlzFf29yPwvOtVnJwXL5nlzO2w="
	vectorPinnedMs = 1700000500000
)

var vectorDevice = DeviceInfo{
	AppVersion:    "vectors",
	PluginVersion: "commonlib-0.1.18",
	VaultName:     "vector-vault",
	DeviceName:    "vector-device",
	Progress:      "",
}

var (
	vectorMu    sync.Mutex
	vectorCache = map[string][]byte{}
)

// readVector reads a vector file once per test binary (the vault dumps
// are large and slow to read under js/wasm).
func readVector(t testing.TB, name string) []byte {
	t.Helper()
	vectorMu.Lock()
	defer vectorMu.Unlock()
	if b, ok := vectorCache[name]; ok {
		return b
	}
	b, err := os.ReadFile(testvectors.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	vectorCache[name] = b
	return b
}

var localDocsCache sync.Map // vault dump name → map[string][]byte

// localDocs returns the remote _local documents of a vault dump by _id
// (decoded once per test binary).
func localDocs(t testing.TB, name string) map[string][]byte {
	t.Helper()
	if docs, ok := localDocsCache.Load(name); ok {
		return docs.(map[string][]byte)
	}
	var dump struct {
		Remote struct {
			LocalDocs []json.RawMessage `json:"localDocs"`
		} `json:"remote"`
	}
	if err := json.Unmarshal(readVector(t, name), &dump); err != nil {
		t.Fatal(err)
	}
	docs := map[string][]byte{}
	for _, d := range dump.Remote.LocalDocs {
		var id struct {
			ID string `json:"_id"`
		}
		if err := json.Unmarshal(d, &id); err != nil {
			t.Fatal(err)
		}
		docs[id.ID] = d
	}
	localDocsCache.Store(name, docs)
	return docs
}

// vectorMilestone is one milestone written by the real library.
type vectorMilestone struct {
	name string
	raw  []byte
	rng  ChunkRange
}

func vectorMilestones(t testing.TB) []vectorMilestone {
	t.Helper()
	return []vectorMilestone{
		{"couchdb-e2ee", localDocs(t, "vault-dump-e2ee.json")[MilestoneDocID], CouchDBChunkRange},
		{"couchdb-plain", localDocs(t, "vault-dump-plain.json")[MilestoneDocID], CouchDBChunkRange},
		{"journal-e2ee", readVector(t, "journal/e2ee/"+JournalMilestoneKey), JournalChunkRange},
		{"journal-plain", readVector(t, "journal/plain/"+JournalMilestoneKey), JournalChunkRange},
	}
}

// sameJSON compares two documents as generic JSON values.
func sameJSON(t testing.TB, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("re-encoded JSON invalid: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

func TestVectorSyncParameters(t *testing.T) {
	want, _ := base64.StdEncoding.DecodeString(vectorSalt)
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"couchdb _local", localDocs(t, "vault-dump-e2ee.json")[SyncParametersDocID]},
		{"journal object", readVector(t, "journal/e2ee/"+JournalSyncParametersKey)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.raw == nil {
				t.Fatal("vector document missing")
			}
			p, err := ParseSyncParameters(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			// The journal object keeps the CouchDB _id.
			if p.ID != SyncParametersDocID || p.Type != TypeSyncParameters || p.ProtocolVersion != ProtocolVersionAdvancedE2EE {
				t.Errorf("got %+v", p)
			}
			salt, err := p.Salt()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(salt, want) {
				t.Errorf("salt = %x, want %x", salt, want)
			}
			if got := JournalEpoch(p); got != "2:"+vectorSalt {
				t.Errorf("JournalEpoch = %q", got)
			}
			if need, err := NeedsNewSalt(&p, nil); need || err != nil {
				t.Errorf("NeedsNewSalt = %v, %v; want false, nil", need, err)
			}
			out, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, out, tc.raw)
		})
	}
	// The plain vault has no sync parameters at all.
	if _, ok := localDocs(t, "vault-dump-plain.json")[SyncParametersDocID]; ok {
		t.Error("plain dump unexpectedly has sync parameters")
	}
}

func TestVectorMilestoneRoundTrip(t *testing.T) {
	for _, v := range vectorMilestones(t) {
		t.Run(v.name, func(t *testing.T) {
			m, err := ParseMilestone(v.raw)
			if err != nil {
				t.Fatal(err)
			}
			// One might expect the journal object's _id to be
			// "_00000000-milestone.json"; the library actually writes
			// MilestoneDocID (ensureRemoteIsCompatible's template).
			if m.ID != MilestoneDocID || m.Type != TypeMilestoneInfo || m.Created != vectorPinnedMs {
				t.Errorf("header = %q %q %d", m.ID, m.Type, m.Created)
			}
			if got := m.NodeChunkInfo[vectorNode]; got != v.rng {
				t.Errorf("node_chunk_info = %+v, want %+v", got, v.rng)
			}
			if got := m.NodeInfo[vectorNode]; got.DeviceInfo != vectorDevice || got.LastConnected != vectorPinnedMs {
				t.Errorf("node_info = %+v", got)
			}
			if n := m.TweakValues[vectorNode].Len(); n != 30 {
				t.Errorf("own tweak set has %d keys, want 30", n)
			}
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, out, v.raw)
			var again Milestone
			if err := json.Unmarshal(out, &again); err != nil {
				t.Fatal(err)
			}
			out2, _ := json.Marshal(&again)
			if !bytes.Equal(out, out2) {
				t.Errorf("second round trip differs:\n%s\n%s", out, out2)
			}
			// Tweak sets keep the library's key order.
			if got, want := m.TweakValues[PreferredNode].Keys(), TemplateKeys()[:30]; !reflect.DeepEqual(got, want) {
				t.Errorf("PREFERRED key order = %v, want %v", got, want)
			}
		})
	}
}

func TestVectorMilestoneCheck(t *testing.T) {
	for _, v := range vectorMilestones(t) {
		t.Run(v.name, func(t *testing.T) {
			m, err := ParseMilestone(v.raw)
			if err != nil {
				t.Fatal(err)
			}
			own := m.TweakValues[vectorNode]
			if got := Check(m, vectorNode, v.rng, own, CheckOptions{}); got.Kind != VerdictOK || got.Err() != nil {
				t.Errorf("own node: %v (%v), want OK", got.Kind, got.Err())
			}

			locked := m.Clone()
			locked.Lock(vectorNode, v.rng, false)
			for _, tc := range []struct {
				node    string
				cleaned bool
				want    VerdictKind
				err     error
			}{
				{vectorNode, false, VerdictLocked, nil},
				{"other-node", false, VerdictNodeLocked, ErrNodeLocked},
				{"other-node", true, VerdictNodeCleaned, ErrNodeCleaned},
			} {
				lm := locked.Clone()
				lm.Cleaned = tc.cleaned
				got := Check(lm, tc.node, v.rng, own, CheckOptions{})
				if got.Kind != tc.want {
					t.Errorf("%s cleaned=%v: %v, want %v", tc.node, tc.cleaned, got.Kind, tc.want)
				}
				if err := got.Err(); err != tc.err {
					t.Errorf("%s cleaned=%v: Err = %v, want %v", tc.node, tc.cleaned, err, tc.err)
				}
			}

			// Tweak mismatch against the stored PREFERRED set.
			changed := own.Clone()
			_ = changed.Set("encrypt", !mustBool(t, own, "encrypt"))
			_ = changed.Set("hashAlg", "sha1")
			got := Check(m, vectorNode, v.rng, changed, CheckOptions{})
			if got.Kind != VerdictMismatched {
				t.Fatalf("got %v, want MISMATCHED", got.Kind)
			}
			enc := mustBool(t, own, "encrypt")
			want := []TweakDiff{
				{Key: "encrypt", Preferred: jsonOf(enc), Current: jsonOf(!enc), Impact: ImpactBreaking},
				{Key: "hashAlg", Preferred: json.RawMessage(`"xxhash64"`), Current: json.RawMessage(`"sha1"`), Impact: ImpactLossy},
			}
			if !reflect.DeepEqual(got.Diffs, want) {
				t.Errorf("diffs = %s, want %s", diffString(got.Diffs), diffString(want))
			}
			if !got.Preferred.Equal(m.TweakValues[PreferredNode]) {
				t.Error("verdict does not carry PREFERRED")
			}
		})
	}
}

func TestVectorMilestoneRegister(t *testing.T) {
	for _, v := range vectorMilestones(t) {
		t.Run(v.name, func(t *testing.T) {
			m, err := ParseMilestone(v.raw)
			if err != nil {
				t.Fatal(err)
			}
			own := m.TweakValues[vectorNode]
			at := time.UnixMilli(vectorPinnedMs + 1000)
			// The library wrote this milestone with tweakModified unset,
			// so its own next connection rewrites it (upstream quirk), and
			// a journal object (no _rev) is rewritten on every connection.
			before, _ := json.Marshal(m)
			if !m.Clone().Register(vectorNode, v.rng, vectorDevice, own, at) {
				t.Error("Register = false, want true (tweakModified undefined / no _rev)")
			}
			// With tweakModified set and stored, a CouchDB milestone (with
			// _rev) that is otherwise current needs no write within 60 s.
			withMod := own.Clone()
			_ = withMod.Set("tweakModified", 1700000400000)
			m2 := m.Clone()
			m2.TweakValues[vectorNode] = withMod.Clone()
			if got, want := m2.Register(vectorNode, v.rng, vectorDevice, withMod, at), m2.Rev == ""; got != want {
				t.Errorf("Register = %v, want %v (rev %q)", got, want, m2.Rev)
			}
			after, _ := json.Marshal(m)
			if !bytes.Equal(before, after) {
				t.Error("Register on a clone changed the original")
			}
		})
	}
}

func mustBool(t testing.TB, tv TweakValues, key string) bool {
	t.Helper()
	b, ok := tv.Bool(key)
	if !ok {
		t.Fatalf("%s is not a boolean", key)
	}
	return b
}

func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func diffString(d []TweakDiff) string {
	b, _ := json.Marshal(d)
	return string(b)
}
