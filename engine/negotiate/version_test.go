package negotiate

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/jsstring"
)

func TestCheckVersion(t *testing.T) {
	// Missing: create with VER; type != "versioninfo": incompatible;
	// version < 12: migrate and bump to 12; == 12: OK; > 12: incompatible.
	for _, tc := range []struct {
		name string
		doc  string // "" = absent
		want VersionVerdict
	}{
		{"absent", "", VersionCreate},
		{"current", `{"_id":"obsydian_livesync_version","type":"versioninfo","version":12}`, VersionOK},
		{"older", `{"_id":"obsydian_livesync_version","type":"versioninfo","version":10}`, VersionMigrate},
		{"zero", `{"type":"versioninfo","version":0}`, VersionMigrate},
		{"newer", `{"type":"versioninfo","version":13}`, VersionIncompatible},
		{"wrong type", `{"type":"notes","version":12}`, VersionIncompatible},
		{"no type", `{"version":12}`, VersionIncompatible},
		{"type not a string", `{"type":12,"version":12}`, VersionIncompatible},
		{"12.0 is 12", `{"type":"versioninfo","version":12.0}`, VersionOK},
		{"12.5 is newer", `{"type":"versioninfo","version":12.5}`, VersionIncompatible},
		{"numeric string (JS coercion)", `{"type":"versioninfo","version":"12"}`, VersionOK},
		{"numeric string older", `{"type":"versioninfo","version":" 11 "}`, VersionMigrate},
		{"hex string", `{"type":"versioninfo","version":"0xC"}`, VersionOK},
		{"empty string is 0", `{"type":"versioninfo","version":""}`, VersionMigrate},
		{"null is 0", `{"type":"versioninfo","version":null}`, VersionMigrate},
		{"true is 1", `{"type":"versioninfo","version":true}`, VersionMigrate},
		{"missing version is NaN", `{"type":"versioninfo"}`, VersionIncompatible},
		{"non-numeric string is NaN", `{"type":"versioninfo","version":"12abc"}`, VersionIncompatible},
		{"Go-only float syntax is NaN", `{"type":"versioninfo","version":"inf"}`, VersionIncompatible},
		{"object is NaN", `{"type":"versioninfo","version":{}}`, VersionIncompatible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc *VersionDoc
			if tc.doc != "" {
				d, err := ParseVersionDoc([]byte(tc.doc))
				if err != nil {
					t.Fatal(err)
				}
				doc = &d
			}
			got, err := CheckVersion(doc)
			if got != tc.want {
				t.Errorf("CheckVersion = %v, want %v", got, tc.want)
			}
			if (err != nil) != (tc.want == VersionIncompatible) {
				t.Errorf("err = %v", err)
			}
			if err != nil && (!errors.Is(err, ErrIncompatible) || !errors.Is(err, engine.ErrUnsupported)) {
				t.Errorf("err %v does not wrap ErrIncompatible and engine.ErrUnsupported", err)
			}
		})
	}
}

func TestVersionDocJSON(t *testing.T) {
	d := NewVersionDoc()
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"_id":"obsydian_livesync_version","type":"versioninfo","version":12}` {
		t.Errorf("NewVersionDoc = %s", out)
	}
	d.Rev = "3-abc"
	out, _ = json.Marshal(d)
	if string(out) != `{"_id":"obsydian_livesync_version","_rev":"3-abc","type":"versioninfo","version":12}` {
		t.Errorf("bumped = %s", out)
	}
	d.Version = math.NaN()
	if _, err := json.Marshal(d); err == nil {
		t.Error("NaN version encoded")
	}
	for _, bad := range []string{``, `null`, `[]`, `{"_id":1}`, `{"_rev":true}`} {
		if _, err := ParseVersionDoc([]byte(bad)); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("ParseVersionDoc(%q) err = %v", bad, err)
		}
	}
}

func TestJSStringToNumber(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"12", 12}, {" 12\n", 12}, {"+12", 12}, {"-1", -1}, {"1e1", 10}, {"1.5", 1.5}, {".5", 0.5},
		{"5.", 5}, {"0b1100", 12}, {"0o14", 12}, {"Infinity", math.Inf(1)}, {"-Infinity", math.Inf(-1)},
		{"", 0}, {"   ", 0}, {"1_2", nan}, {"0x1_0", nan}, {"--1", nan}, {"1e", nan}, {"e1", nan},
		{"1.2.3", nan}, {"infinity", nan}, {"NaN", nan}, {"0x", nan}, {"-0x10", nan}, {"1e400", math.Inf(1)},
	} {
		got := jsstring.Number(tc.in)
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("jsstring.Number(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
