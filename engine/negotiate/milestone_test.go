package negotiate

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// fullTweaks is a complete current set (every template key, tweakModified
// set), so Register's tweak comparison is not forced by an undefined key.
func fullTweaks(t testing.TB) TweakValues {
	t.Helper()
	v := ShouldMatchTemplate()
	for _, k := range TemplateKeys() {
		if !v.Has(k) {
			if err := v.Set(k, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return v
}

var (
	t0  = time.UnixMilli(1700000000000)
	dev = DeviceInfo{DeviceName: "d", VaultName: "v", AppVersion: "1.8", PluginVersion: "0.25", Progress: "10-abc"}
)

func TestRegisterNewMilestone(t *testing.T) {
	cur := fullTweaks(t)
	m := NewMilestone("me", t0)
	if !m.Register("me", CouchDBChunkRange, dev, cur, t0) {
		t.Fatal("a new milestone must be written")
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// Stored sets follow TweakValuesTemplate's key order (extractObject).
	curJSON, _ := json.Marshal(cur.Extract(TemplateKeys()))
	want := `{"_id":"_local/obsydian_livesync_milestone","type":"milestoneinfo","created":1700000000000,"locked":false,` +
		`"accepted_nodes":["me"],"node_chunk_info":{"me":{"min":0,"max":2400,"current":2}},` +
		`"node_info":{"me":{"app_version":"1.8","plugin_version":"0.25","vault_name":"v","device_name":"d","progress":"10-abc","last_connected":1700000000000}},` +
		`"tweak_values":{"PREFERRED":` + string(curJSON) + `,"me":` + string(curJSON) + `}}`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	// The written sets are copies: changing current afterwards does not
	// change the milestone.
	_ = cur.Set("encrypt", true)
	if b, _ := m.TweakValues[PreferredNode].Bool("encrypt"); b {
		t.Error("PREFERRED aliases current")
	}
}

func TestRegister(t *testing.T) {
	cur := fullTweaks(t)
	// stored is the milestone as the server holds it after this node
	// registered at t0 (it has a _rev now).
	stored := NewMilestone("me", t0)
	stored.Register("me", CouchDBChunkRange, dev, cur, t0)
	stored.Rev = "0-1"
	other := ShouldMatchTemplate()
	_ = other.Set("encrypt", true)

	for _, tc := range []registerCase{
		{name: "nothing changed within 60 s", at: t0.Add(30 * time.Second), want: false},
		{name: "exactly 60 s is not stale", at: t0.Add(60 * time.Second), want: false},
		{name: "60.001 s is stale: last_connected rewritten", at: t0.Add(60*time.Second + time.Millisecond), want: true,
			check: func(t *testing.T, _, m *Milestone) {
				if got := m.NodeInfo["me"].LastConnected; got != t0.UnixMilli()+60001 {
					t.Errorf("last_connected = %d", got)
				}
			}},
		{name: "clock behind last_connected", at: t0.Add(-time.Hour), want: false},
		{name: "no _rev (journal object) is always written", at: t0.Add(time.Second), want: true,
			edit: func(m *Milestone, _ *TweakValues, _ *DeviceInfo, _ *ChunkRange) { m.Rev = "" }},
		{name: "changed tweak is written, PREFERRED kept", at: t0.Add(time.Second), want: true,
			edit: func(_ *Milestone, cur *TweakValues, _ *DeviceInfo, _ *ChunkRange) { _ = cur.Set("hashAlg", "sha1") },
			check: func(t *testing.T, before, m *Milestone) {
				if s, _ := m.TweakValues["me"].String("hashAlg"); s != "sha1" {
					t.Errorf("own hashAlg = %q", s)
				}
				if !m.TweakValues[PreferredNode].Equal(before.TweakValues[PreferredNode]) {
					t.Error("PREFERRED changed")
				}
				if m.NodeInfo["me"].LastConnected != t0.UnixMilli() {
					t.Error("last_connected changed within 60 s")
				}
			}},
		{name: "unset tweakModified always rewrites (upstream quirk)", at: t0.Add(time.Second), want: true,
			edit: func(m *Milestone, cur *TweakValues, _ *DeviceInfo, _ *ChunkRange) {
				cur.Delete("tweakModified")
				own := m.TweakValues["me"].Clone()
				own.Delete("tweakModified")
				m.TweakValues["me"] = own
			}},
		{name: "non-template keys of current are not stored", at: t0.Add(time.Second), want: false,
			edit: func(_ *Milestone, cur *TweakValues, _ *DeviceInfo, _ *ChunkRange) { _ = cur.Set("passphrase", "x") }},
		{name: "missing PREFERRED is created from current", at: t0.Add(time.Second), want: true,
			edit: func(m *Milestone, _ *TweakValues, _ *DeviceInfo, _ *ChunkRange) { delete(m.TweakValues, PreferredNode) },
			check: func(t *testing.T, _, m *Milestone) {
				if !m.TweakValues[PreferredNode].Equal(cur) {
					t.Error("PREFERRED != current")
				}
			}},
		{name: "existing foreign PREFERRED is never overwritten", at: t0.Add(time.Second), want: true,
			edit: func(m *Milestone, cur *TweakValues, _ *DeviceInfo, _ *ChunkRange) {
				m.TweakValues[PreferredNode] = other.Clone()
				_ = cur.Set("minimumChunkSize", 40)
			},
			check: func(t *testing.T, _, m *Milestone) {
				if !m.TweakValues[PreferredNode].Equal(other) {
					t.Error("PREFERRED overwritten")
				}
			}},
		{name: "device info changed", at: t0.Add(time.Second), want: true,
			edit: func(_ *Milestone, _ *TweakValues, info *DeviceInfo, _ *ChunkRange) { info.Progress = "11-def" },
			check: func(t *testing.T, _, m *Milestone) {
				if m.NodeInfo["me"].Progress != "11-def" {
					t.Error("progress not updated")
				}
			}},
		{name: "own node_info missing", at: t0.Add(time.Second), want: true,
			edit: func(m *Milestone, _ *TweakValues, _ *DeviceInfo, _ *ChunkRange) { delete(m.NodeInfo, "me") },
			check: func(t *testing.T, _, m *Milestone) {
				if n := m.NodeInfo["me"]; n.DeviceInfo != dev || n.LastConnected != t0.UnixMilli()+1000 {
					t.Errorf("node_info = %+v", n)
				}
			}},
		{name: "range changed: min/max updated, current kept", at: t0.Add(time.Second), want: true,
			edit: func(_ *Milestone, _ *TweakValues, _ *DeviceInfo, my *ChunkRange) {
				*my = ChunkRange{Min: 1, Max: 3000, Current: 7}
			},
			check: func(t *testing.T, _, m *Milestone) {
				if got := m.NodeChunkInfo["me"]; got != (ChunkRange{Min: 1, Max: 3000, Current: 2}) {
					t.Errorf("node_chunk_info = %+v", got)
				}
			}},
		{name: "only current differs: no write", at: t0.Add(time.Second), want: false,
			edit: func(_ *Milestone, _ *TweakValues, _ *DeviceInfo, my *ChunkRange) { my.Current = 9 }},
		{name: "missing own range alone does not force a write", at: t0.Add(time.Second), want: false,
			edit: func(m *Milestone, _ *TweakValues, _ *DeviceInfo, _ *ChunkRange) { delete(m.NodeChunkInfo, "me") },
			check: func(t *testing.T, _, m *Milestone) {
				if _, ok := m.NodeChunkInfo["me"]; ok {
					t.Error("milestone changed although no write-back is needed")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, stored, cur) })
	}
}

// registerCase is one case of TestRegister: the milestone as stored,
// changed by edit, registered again at at.
type registerCase struct {
	name  string
	edit  func(m *Milestone, cur *TweakValues, info *DeviceInfo, my *ChunkRange)
	at    time.Time
	want  bool
	check func(t *testing.T, before, m *Milestone)
}

func (tc registerCase) run(t *testing.T, stored *Milestone, cur TweakValues) {
	m := stored.Clone()
	c := cur.Clone()
	info, my := dev, CouchDBChunkRange
	if tc.edit != nil {
		tc.edit(m, &c, &info, &my)
	}
	before := m.Clone()
	got := m.Register("me", my, info, c, tc.at)
	if got != tc.want {
		t.Fatalf("Register = %v, want %v", got, tc.want)
	}
	if !got {
		b1, _ := json.Marshal(before)
		b2, _ := json.Marshal(m)
		if string(b1) != string(b2) {
			t.Errorf("milestone changed without a write-back:\n%s\n%s", b1, b2)
		}
	}
	if got && m.TweakValues["me"].Has("passphrase") {
		t.Error("non-template key stored")
	}
	if tc.check != nil {
		tc.check(t, before, m)
	}
}

func TestRegisterOnZeroMilestone(t *testing.T) {
	var m Milestone // nil maps: no panic
	if !m.Register("me", JournalChunkRange, dev, fullTweaks(t), t0) {
		t.Error("want write")
	}
	if m.NodeChunkInfo["me"] != JournalChunkRange {
		t.Error("range not recorded")
	}
}

func TestLockUnlockAccept(t *testing.T) {
	m := NewMilestone("a", t0)
	m.AcceptedNodes = []string{"a", "b", "c"}
	m.NodeChunkInfo["b"] = ChunkRange{Min: 0, Max: 10, Current: 1}

	m.Lock("b", CouchDBChunkRange, false)
	if !m.Locked || m.Cleaned || !reflect.DeepEqual(m.AcceptedNodes, []string{"b"}) {
		t.Errorf("after Lock: locked=%v cleaned=%v accepted=%v", m.Locked, m.Cleaned, m.AcceptedNodes)
	}
	if m.NodeChunkInfo["b"] != (ChunkRange{Min: 0, Max: 10, Current: 1}) {
		t.Error("Lock overwrote an existing range")
	}
	out, _ := json.Marshal(m)
	if !strings.Contains(string(out), `"locked":true,"cleaned":false`) {
		t.Errorf("markRemoteLocked writes cleaned: %s", out)
	}

	m.Accept("a", CouchDBChunkRange)
	m.Accept("a", CouchDBChunkRange)
	if !reflect.DeepEqual(m.AcceptedNodes, []string{"b", "a"}) || !m.Locked {
		t.Errorf("after Accept: %v locked=%v", m.AcceptedNodes, m.Locked)
	}
	if m.NodeChunkInfo["a"] != CouchDBChunkRange {
		t.Error("Accept did not add the range")
	}

	m.Lock("b", CouchDBChunkRange, true)
	if !m.Cleaned {
		t.Error("Lock(cleaned) did not set cleaned")
	}
	m.Lock("b", CouchDBChunkRange, false)
	m.Unlock("c", CouchDBChunkRange)
	if m.Locked || !m.Cleaned || !reflect.DeepEqual(m.AcceptedNodes, []string{"c"}) {
		t.Errorf("after Unlock: locked=%v cleaned=%v accepted=%v (cleaned is sticky, accepted reset)", m.Locked, m.Cleaned, m.AcceptedNodes)
	}

	d := Milestone{AcceptedNodes: []string{"x", "x", "y", "x"}}
	d.Accept("y", JournalChunkRange)
	if !reflect.DeepEqual(d.AcceptedNodes, []string{"x", "y"}) {
		t.Errorf("Accept dedup = %v", d.AcceptedNodes)
	}
}

func TestCheck(t *testing.T) {
	cur := fullTweaks(t)
	breaking := cur.Clone()
	_ = breaking.Set("encrypt", true)
	v1 := cur.Clone() // differs from TweakDefaults: a null PREFERRED must not act as {}
	_ = v1.Set("E2EEAlgorithm", "")
	ms := func(edit func(m *Milestone)) *Milestone {
		m := NewMilestone("me", t0)
		m.Register("me", CouchDBChunkRange, dev, cur, t0)
		if edit != nil {
			edit(m)
		}
		return m
	}
	accept := func(nodes ...string) func(m *Milestone) {
		return func(m *Milestone) { m.AcceptedNodes = append([]string{"me"}, nodes...) }
	}
	for _, tc := range []struct {
		name string
		m    *Milestone
		my   ChunkRange
		cur  TweakValues
		o    CheckOptions
		want VerdictKind
	}{
		{"no milestone", nil, CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"fresh", ms(nil), CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"overlapping ranges", ms(func(m *Milestone) {
			accept("b")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 2, Max: 2, Current: 2}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"journal and couchdb ranges intersect", ms(func(m *Milestone) {
			accept("j")(m)
			m.NodeChunkInfo["j"] = JournalChunkRange
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"disjoint ranges", ms(func(m *Milestone) {
			accept("b")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 2500, Max: 3000}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictIncompatible},
		{"disjoint ranges ignored", ms(func(m *Milestone) {
			accept("b")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 2500, Max: 3000}
		}), CouchDBChunkRange, cur, CheckOptions{IgnoreVersionCheck: true}, VerdictOK},
		{"two others narrow to empty", ms(func(m *Milestone) {
			accept("b", "c")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 0, Max: 5}
			m.NodeChunkInfo["c"] = ChunkRange{Min: 6, Max: 10}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictIncompatible},
		{"accepted node without range sets [0,0], it does not intersect (upstream quirk)", ms(func(m *Milestone) {
			accept("ghost")(m)
		}), ChunkRange{Min: 1, Max: 5}, cur, CheckOptions{}, VerdictOK},
		{"a later node narrows the reset [0,0]", ms(func(m *Milestone) {
			accept("ghost", "b")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 1, Max: 5}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictIncompatible},
		{"node without range resets an empty intersection (upstream quirk)", ms(func(m *Milestone) {
			accept("b", "ghost")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 2500, Max: 3000}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"unaccepted nodes are not compared", ms(func(m *Milestone) {
			m.NodeChunkInfo["b"] = ChunkRange{Min: 2500, Max: 3000}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"my own stored range is not compared", ms(func(m *Milestone) {
			m.NodeChunkInfo["me"] = ChunkRange{Min: 2500, Max: 3000}
		}), CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"mismatch", ms(nil), CouchDBChunkRange, breaking, CheckOptions{}, VerdictMismatched},
		{"mismatch disabled", ms(nil), CouchDBChunkRange, breaking, CheckOptions{DisableCheckingConfigMismatch: true}, VerdictOK},
		{"no PREFERRED: own set is preferred", ms(func(m *Milestone) { delete(m.TweakValues, PreferredNode) }),
			CouchDBChunkRange, breaking, CheckOptions{}, VerdictOK},
		{"null PREFERRED: own set is preferred", ms(func(m *Milestone) { m.TweakValues[PreferredNode] = TweakValues{null: true} }),
			CouchDBChunkRange, v1, CheckOptions{}, VerdictOK},
		{"empty PREFERRED: defaults apply", ms(func(m *Milestone) { m.TweakValues[PreferredNode] = TweakValues{} }),
			CouchDBChunkRange, v1, CheckOptions{}, VerdictMismatched},
		{"incompatible is checked before mismatch", ms(func(m *Milestone) {
			accept("b")(m)
			m.NodeChunkInfo["b"] = ChunkRange{Min: 2500, Max: 3000}
		}), CouchDBChunkRange, breaking, CheckOptions{}, VerdictIncompatible},
		{"mismatch is checked before lock", ms(func(m *Milestone) { m.Locked = true; m.AcceptedNodes = []string{"x"} }),
			CouchDBChunkRange, breaking, CheckOptions{}, VerdictMismatched},
		{"locked, accepted", ms(func(m *Milestone) { m.Locked = true }), CouchDBChunkRange, cur, CheckOptions{}, VerdictLocked},
		{"locked, not accepted", ms(func(m *Milestone) { m.Locked = true; m.AcceptedNodes = []string{"x"} }),
			CouchDBChunkRange, cur, CheckOptions{}, VerdictNodeLocked},
		{"locked, not accepted, cleaned", ms(func(m *Milestone) { m.Locked = true; m.Cleaned = true; m.AcceptedNodes = nil }),
			CouchDBChunkRange, cur, CheckOptions{}, VerdictNodeCleaned},
		{"cleaned but unlocked", ms(func(m *Milestone) { m.Cleaned = true; m.AcceptedNodes = []string{"x"} }),
			CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
		{"zero milestone", &Milestone{}, CouchDBChunkRange, cur, CheckOptions{}, VerdictOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []byte
			if tc.m != nil {
				before, _ = json.Marshal(tc.m)
			}
			got := Check(tc.m, "me", tc.my, tc.cur, tc.o)
			if got.Kind != tc.want {
				t.Errorf("Check = %v, want %v", got.Kind, tc.want)
			}
			if (got.Kind == VerdictMismatched) != (len(got.Diffs) > 0) {
				t.Errorf("diffs %v with verdict %v", got.Diffs, got.Kind)
			}
			if tc.m != nil {
				if after, _ := json.Marshal(tc.m); string(after) != string(before) {
					t.Error("Check modified the milestone")
				}
			}
		})
	}
}

func TestVerdictErr(t *testing.T) {
	mismatch := Verdict{Kind: VerdictMismatched, Diffs: []TweakDiff{
		{Key: "encrypt", Preferred: raw(`true`), Current: raw(`false`), Impact: ImpactBreaking},
		{Key: "hashAlg", Preferred: raw(`"xxhash64"`), Current: raw(`"sha1"`), Impact: ImpactLossy},
	}}
	for _, tc := range []struct {
		v       Verdict
		is, not []error
	}{
		{Verdict{Kind: VerdictOK}, nil, nil},
		{Verdict{Kind: VerdictLocked}, nil, nil},
		{Verdict{Kind: VerdictNodeLocked}, []error{ErrNodeLocked, ErrLocked}, []error{ErrNodeCleaned, ErrIncompatible}},
		{Verdict{Kind: VerdictNodeCleaned}, []error{ErrNodeCleaned, ErrLocked}, []error{ErrNodeLocked}},
		{Verdict{Kind: VerdictIncompatible}, []error{ErrIncompatible, engine.ErrUnsupported}, []error{ErrLocked}},
		{mismatch, []error{ErrTweakMismatch}, []error{ErrLocked, ErrIncompatible}},
		{Verdict{Kind: VerdictKind(99)}, []error{ErrIncompatible}, nil},
	} {
		err := tc.v.Err()
		if (err == nil) != (len(tc.is) == 0) {
			t.Errorf("%v: Err = %v", tc.v.Kind, err)
		}
		for _, e := range tc.is {
			if !errors.Is(err, e) {
				t.Errorf("%v: %v is not %v", tc.v.Kind, err, e)
			}
		}
		for _, e := range tc.not {
			if errors.Is(err, e) {
				t.Errorf("%v: %v is %v", tc.v.Kind, err, e)
			}
		}
	}
	var tm *TweakMismatchError
	if err := mismatch.Err(); !errors.As(err, &tm) || len(tm.Diffs) != 2 || !tm.Breaking() || tm.OnlyLossy() {
		t.Fatalf("TweakMismatchError = %#v", err)
	}
	want := `negotiate: tweak values differ from the remote's preferred values: encrypt preferred true, current false (breaking); hashAlg preferred "xxhash64", current "sha1" (lossy)`
	if tm.Error() != want {
		t.Errorf("message\n%s\nwant\n%s", tm.Error(), want)
	}
	lossy := &TweakMismatchError{Diffs: mismatch.Diffs[1:]}
	if lossy.Breaking() || !lossy.OnlyLossy() || (&TweakMismatchError{}).OnlyLossy() {
		t.Error("Breaking/OnlyLossy")
	}
	if VerdictNodeCleaned.String() != "NODE_CLEANED" || VersionMigrate.String() != "MIGRATE" || ImpactLossy.String() != "lossy" {
		t.Error("String names")
	}
}

func TestMilestoneJSON(t *testing.T) {
	in := `{"_id":"_00000000-milestone.json","type":"milestoneinfo","created":1.7e12,"locked":true,"cleaned":false,` +
		`"accepted_nodes":["a"],"node_chunk_info":{"a":{"min":0,"max":2,"current":2}},` +
		`"node_info":{"a":{"app_version":"x","plugin_version":"y","vault_name":"v","device_name":"d","progress":"p","last_connected":5,"os":"linux"}},` +
		`"tweak_values":{"a":{"encrypt":true,"future":{"x":[1]}},"PREFERRED":null},"future_top":[1,2,3]}`
	m, err := ParseMilestone([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.Created != 1700000000000 || !m.Locked || m.Cleaned {
		t.Errorf("decoded %+v", m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out, []byte(in))
	c := m.Clone()
	c.NodeInfo["a"] = NodeInfo{}
	ta := c.TweakValues["a"]
	ta.Delete("encrypt")
	_ = ta.Set("future", 0)
	if out2, _ := json.Marshal(m); string(out2) != string(out) {
		t.Error("Clone shares storage")
	}

	// Absent members: nothing is invented except the modelled collections.
	m, err = ParseMilestone([]byte(`{"_id":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = json.Marshal(m)
	if string(out) != `{"_id":"x","type":"","created":0,"locked":false,"accepted_nodes":[],"node_chunk_info":{},"node_info":{},"tweak_values":{}}` {
		t.Errorf("minimal = %s", out)
	}

	for _, bad := range []string{``, `null`, `[]`, `{"created":"1"}`, `{"created":1.5}`, `{"locked":"yes"}`, `{"cleaned":1}`,
		`{"accepted_nodes":[1]}`, `{"accepted_nodes":"a"}`, `{"node_chunk_info":{"a":{"min":"0"}}}`, `{"node_chunk_info":{"a":[]}}`,
		`{"node_info":{"a":{"progress":3}}}`, `{"node_info":{"a":1}}`, `{"tweak_values":{"a":"x"}}`, `{"tweak_values":[]}`} {
		if _, err := ParseMilestone([]byte(bad)); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("ParseMilestone(%s) err = %v", bad, err)
		}
	}
	var z Milestone
	if err := json.Unmarshal([]byte(`{"locked":"yes"}`), &z); err == nil {
		t.Error("json.Unmarshal accepted a bad milestone")
	}

	nd := NodeInfoDoc{ID: NodeInfoDocID, Type: TypeNodeInfo, NodeID: "k3j9x0a1bq", V20220607: true}
	if b, _ := json.Marshal(nd); string(b) != `{"_id":"_local/obsydian_livesync_nodeinfo","type":"nodeinfo","nodeid":"k3j9x0a1bq","v20220607":true}` {
		t.Errorf("NodeInfoDoc = %s", b)
	}
}

// A node id has upstream's shape: 10 base-36 characters, fresh each time.
func TestNewNodeID(t *testing.T) {
	a, err := NewNodeID()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewNodeID()
	if len(a) != 10 || strings.Trim(a, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		t.Errorf("node id %q is not 10 base-36 characters", a)
	}
	if a == b {
		t.Errorf("two node ids are both %q", a)
	}
}
