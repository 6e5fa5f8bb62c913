package negotiate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The set a new vault announces is the one the library wrote into the
// interop vectors' milestones (extractObject(TweakValuesTemplate,
// settings) on createNewVaultSettings() plus a preset): the same 30 keys
// in the same order with the same values, once the vault's own choices
// (chunk size, E2EE, path obfuscation) are set.
func TestNewVaultTweaksMatchTheLibrary(t *testing.T) {
	for _, v := range vectorMilestones(t) {
		t.Run(v.name, func(t *testing.T) {
			m, err := ParseMilestone(v.raw)
			if err != nil {
				t.Fatal(err)
			}
			pref := m.TweakValues[PreferredNode]
			got := NewVaultTweaks()
			for _, k := range []string{"customChunkSize", "encrypt", "usePathObfuscation"} {
				raw, _ := pref.Get(k)
				if err := got.SetRaw(k, raw); err != nil {
					t.Fatal(err)
				}
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(pref)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("NewVaultTweaks with the vault's choices =\n%s\nthe library wrote\n%s", gotJSON, wantJSON)
			}
			if got.Len() != 30 {
				t.Errorf("%d keys, want 30", got.Len())
			}
		})
	}
}

// A set holding only the must-match keys (what this engine stored before
// it wrote the recommended ones) is written with every template key but
// tweakModified: the recommended keys a plugin's settings always hold
// take the new-vault values. A must-match key it lacks stays absent.
func TestRegisterWritesTheRecommendedKeys(t *testing.T) {
	cur := ShouldMatchTemplate()
	_ = cur.Set("usePluginSyncV2", true)
	cur.Delete("useSegmenter")
	m := NewMilestone("me", t0)
	if !m.Register("me", CouchDBChunkRange, dev, cur, t0) {
		t.Fatal("a new milestone must be written")
	}
	var want []string
	for _, k := range TemplateKeys() {
		if k != "tweakModified" && k != "useSegmenter" {
			want = append(want, k)
		}
	}
	for _, node := range []string{"me", PreferredNode} {
		stored := m.TweakValues[node]
		if got := stored.Keys(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s keys =\n%v\nwant\n%v", node, got, want)
		}
		for _, k := range []string{"batch_size", "readChunksOnline", "concurrencyOfReadChunksOnline", "ignoreFiles"} {
			g, _ := stored.Get(k)
			w, _ := NewVaultTweaks().Get(k)
			if string(g) != string(w) {
				t.Errorf("%s %s = %s, want %s", node, k, g, w)
			}
		}
		if b, _ := stored.Bool("usePluginSyncV2"); !b {
			t.Errorf("%s usePluginSyncV2: current's value not kept", node)
		}
	}
	// Values current has are kept, recommended or not.
	own := NewVaultTweaks()
	_ = own.Set("batch_size", 100)
	m2 := NewMilestone("me", t0)
	m2.Register("me", CouchDBChunkRange, dev, own, t0)
	if n, _ := m2.TweakValues["me"].Number("batch_size"); n != 100 {
		t.Errorf("batch_size = %v, want current's 100", n)
	}
}

// Recommended keys are stored for the user to compare, never checked:
// a preferred set that differs on all of them, or a current set that
// lacks them, is still OK.
func TestCheckIgnoresRecommendedKeys(t *testing.T) {
	pref := NewVaultTweaks()
	for _, p := range recommendedTemplate {
		if ImpactOf(p.key) != ImpactNone {
			continue
		}
		var v any = 7
		if p.value == "true" || p.value == "false" {
			v = p.value == "false"
		}
		if err := pref.Set(p.key, v); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMilestone("other", t0)
	m.Register("other", CouchDBChunkRange, dev, pref, t0)
	for name, cur := range map[string]TweakValues{
		"new vault":       NewVaultTweaks(),
		"must-match only": func() TweakValues { c := ShouldMatchTemplate(); _ = c.Set("usePluginSyncV2", true); return c }(),
	} {
		if v := Check(m, "other", CouchDBChunkRange, cur, CheckOptions{}); v.Kind != VerdictOK {
			t.Errorf("%s: %v %s, want OK", name, v.Kind, diffString(v.Diffs))
		}
	}
	// A must-match difference is still found.
	cur := NewVaultTweaks()
	_ = cur.Set("encrypt", true)
	if v := Check(m, "other", CouchDBChunkRange, cur, CheckOptions{}); v.Kind != VerdictMismatched {
		t.Errorf("encrypt differs: %v, want MISMATCHED", v.Kind)
	}
}
