package docid

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

type idsVectors struct {
	Passphrase string `json:"passphrase"`
	Algorithm  struct {
		HashedPassphrase string `json:"hashedPassphrase"`
	} `json:"algorithm"`
	Configs []struct {
		Name     string `json:"name"`
		Settings struct {
			HandleFilenameCaseSensitive bool   `json:"handleFilenameCaseSensitive"`
			UsePathObfuscation          bool   `json:"usePathObfuscation"`
			Passphrase                  string `json:"passphrase"`
		} `json:"settings"`
	} `json:"configs"`
	Entries []struct {
		Path string `json:"path"`
		IDs  map[string]struct {
			ID                    string  `json:"id"`
			ID2Path               *string `json:"id2path"`
			HiddenFileSyncID      *string `json:"hiddenFileSyncId"`
			HiddenFileSyncDocPath *string `json:"hiddenFileSyncDocPath"`
		} `json:"ids"`
	} `json:"entries"`
	Path2IDBase []struct {
		Input               string `json:"input"`
		CaseInsensitive     bool   `json:"caseInsensitive"`
		ObfuscatePassphrase any    `json:"obfuscatePassphrase"` // string or false
		Path2IDBase         string `json:"path2id_base"`
	} `json:"path2id_base"`
}

func loadIDs(t *testing.T) *idsVectors {
	t.Helper()
	raw, err := os.ReadFile(testvectors.Path("ids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v idsVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// obfuscatedMarker is what the JavaScript id2path threw for "f:" ids when
// the vectors were made.
const obfuscatedMarker = "ERROR: Entry has been obfuscated!"

// TestVectors checks every entry of ids.json under all four configs: the
// id, its reverse mapping and the Hidden File Sync id.
func TestVectors(t *testing.T) {
	v := loadIDs(t)
	if len(v.Entries) != 29 || len(v.Configs) != 4 {
		t.Fatalf("ids.json: %d entries, %d configs; want 29 and 4", len(v.Entries), len(v.Configs))
	}
	checked, hidden := 0, 0
	for _, c := range v.Configs {
		o := Options{CaseSensitive: c.Settings.HandleFilenameCaseSensitive}
		if c.Settings.UsePathObfuscation {
			o.ObfuscationPassphrase = c.Settings.Passphrase
		}
		m := New(o)
		for _, e := range v.Entries {
			want, ok := e.IDs[c.Name]
			if !ok {
				t.Fatalf("entry %q has no id for config %s", e.Path, c.Name)
			}
			if got := m.FromPath(e.Path); got != want.ID {
				t.Errorf("%s: FromPath(%q) = %q, want %q", c.Name, e.Path, got, want.ID)
			}
			if got := FromPath(e.Path, o); got != want.ID {
				t.Errorf("%s: package FromPath(%q) = %q, want %q", c.Name, e.Path, got, want.ID)
			}
			checked++
			gotPath, gotOK := ToPath(want.ID)
			switch {
			case want.ID2Path == nil: // obfuscated configs: not reversible
				if gotOK {
					t.Errorf("%s: ToPath(%q) = %q, true; want not reversible", c.Name, want.ID, gotPath)
				}
			case *want.ID2Path == obfuscatedMarker:
				if gotOK {
					t.Errorf("%s: ToPath(%q) = %q, true; upstream throws", c.Name, want.ID, gotPath)
				}
			default:
				if !gotOK || gotPath != *want.ID2Path {
					t.Errorf("%s: ToPath(%q) = %q, %v; want %q", c.Name, want.ID, gotPath, gotOK, *want.ID2Path)
				}
			}
			if want.HiddenFileSyncID != nil {
				hidden++
				if got := m.HiddenFileID(e.Path); got != *want.HiddenFileSyncID {
					t.Errorf("%s: HiddenFileID(%q) = %q, want %q", c.Name, e.Path, got, *want.HiddenFileSyncID)
				}
				if got := HiddenFileID(e.Path, o); got != *want.HiddenFileSyncID {
					t.Errorf("%s: package HiddenFileID(%q) = %q, want %q", c.Name, e.Path, got, *want.HiddenFileSyncID)
				}
				if got := m.HiddenFileID("i:" + e.Path); got != *want.HiddenFileSyncID {
					t.Errorf("%s: HiddenFileID doubles the i: prefix: %q", c.Name, got)
				}
				if !IsHiddenFileID(*want.HiddenFileSyncID) {
					t.Errorf("IsHiddenFileID(%q) = false", *want.HiddenFileSyncID)
				}
				p, ok := ToPath(*want.HiddenFileSyncID)
				if c.Settings.UsePathObfuscation {
					if ok {
						t.Errorf("ToPath(%q) = %q, true; want not reversible", *want.HiddenFileSyncID, p)
					}
				} else if !ok || p != *want.HiddenFileSyncDocPath {
					t.Errorf("ToPath(%q) = %q, %v; want %q", *want.HiddenFileSyncID, p, ok, *want.HiddenFileSyncDocPath)
				}
			}
		}
	}
	if checked != 29*4 || hidden != 3*4 {
		t.Errorf("checked %d ids and %d hidden-file ids; want 116 and 12", checked, hidden)
	}
}

func TestHashedPassphrase(t *testing.T) {
	v := loadIDs(t)
	m := New(Options{ObfuscationPassphrase: v.Passphrase})
	want := v.Algorithm.HashedPassphrase + ":"
	if got := string(m.hashedPassphrase[:]); got != want {
		t.Errorf("hashed passphrase = %q, want %q", got, want)
	}
}

// TestPath2IDBase checks the path2id_base list of ids.json (already
// normalised inputs, so FromPath must agree with path2id_base).
func TestPath2IDBase(t *testing.T) {
	v := loadIDs(t)
	if len(v.Path2IDBase) != 16 {
		t.Fatalf("path2id_base has %d rows, want 16", len(v.Path2IDBase))
	}
	for _, r := range v.Path2IDBase {
		o := Options{CaseSensitive: !r.CaseInsensitive}
		if p, ok := r.ObfuscatePassphrase.(string); ok {
			o.ObfuscationPassphrase = p
		}
		if got := FromPath(r.Input, o); got != r.Path2IDBase {
			t.Errorf("FromPath(%q, %+v) = %q, want %q", r.Input, o.CaseSensitive, got, r.Path2IDBase)
		}
	}
}

// TestFromPath covers engine/FORMAT.md §2's table (from commonlib
// src/string_and_binary/path.unit.spec.ts) and the split(":", 2) quirks of
// path2id_base, whose expected values come from JavaScript's own split and
// toLowerCase in Node.
func TestFromPath(t *testing.T) {
	const vp = "vector-passphrase"
	tests := []struct {
		name string
		path string
		o    Options
		want string
	}{
		{"spec: CJK obfuscated", "資料/概要.md", Options{ObfuscationPassphrase: "path-obfuscation-regression-secret"},
			"f:d17ef57666777963bdb6875c83e16b39fee9ca7f7c3593f1b50af691c7bc2fa8"},
		{"spec: underscore obfuscated case-sensitive", "_private/Calculus.md",
			Options{CaseSensitive: true, ObfuscationPassphrase: "path-obfuscation-regression-secret"},
			"f:2a18fa03d734284a8ace4d3c0a7b65558209b8f092ae36be1fdfc3626bc99268"},
		{"spec: passphrase test", "Hello.md", Options{ObfuscationPassphrase: "test"},
			"f:1204060a7b993cff89b2c745a6f7b8a40e6b2defeced3903efa3428dc0a4066b"},
		{"spec: underscore plain", "_private/Calculus.md", Options{}, "/_private/calculus.md"},
		{"empty", "", Options{}, ""},
		{"two colons: prefix is first part", "a:b:c.md", Options{ObfuscationPassphrase: vp},
			"a:f:034fea5d967816c45c35bb0b306ae861fa400507e0ec8478cc3ee24019d3fefb"},
		{"two colons plain", "a:b:c.md", Options{}, "a:b:c.md"},
		{"empty second part: no prefix", "a::b.md", Options{ObfuscationPassphrase: vp},
			"f:a9c8332ea28ea167eafc25c3259e6a8a54d8553833aa496c5ab6a35c78b5f247"},
		{"leading colon is a prefix", ":x.md", Options{ObfuscationPassphrase: vp},
			":f:67bd18da75f008d06eb04e2a4cffa437beb3f02a50f68d6005bd437ff3f2d1dd"},
		{"underscore with prefix keeps slash", "_a:B.md", Options{ObfuscationPassphrase: vp},
			"/_a:f:3be9154e24187c79f1aba36ff5ee5c7c2b83d1cd614993bb1f7888eea611bd4b"},
		{"underscore with prefix plain", "_a:B.md", Options{}, "/_a:b.md"},
		{"capital F: is lowered after the f: test", "F:Note.md", Options{ObfuscationPassphrase: vp},
			"f:f:c92e3adea7aaaf4735212ad8b9ba5fddab67ea464dd5ce308d9da5196f4e4d79"},
		{"capital F: case-sensitive", "F:Note.md", Options{CaseSensitive: true, ObfuscationPassphrase: vp},
			"F:f:cb110e8cf1feefb7915e6b683938638bebb1c51b0c0093a7307065147e07c982"},
		{"capital F: plain", "F:Note.md", Options{}, "f:note.md"},
		{"hidden underscore", "i:_x.md", Options{ObfuscationPassphrase: vp},
			"i:f:7ee2adc9989651ac2e6a81432c022c0e280ff06e037d6c91eb7f1b38cf0f0b8e"},
		{"hidden underscore plain: no slash", "i:_x.md", Options{}, "i:_x.md"},
		{"normalised then sigma", `Dir\\Sub//ΟΔΟΣ.md`, Options{ObfuscationPassphrase: vp},
			"f:1244f0f94bfc331244da02edf26f36756f92d4673ea5439838f48b64b76d297e"},
		{"normalised plain", `Dir\\Sub//ΟΔΟΣ.md`, Options{}, "dir/sub/οδοσ.md"},
		{"trailing colon", "with:", Options{ObfuscationPassphrase: vp},
			"f:0fb18552232419dddd872cbd6a1e60bce3811f01c4ebbb80487e7d611a760424"},
		{"long path (no stack buffer)", strings.Repeat("x", 300) + "/Y.md", Options{ObfuscationPassphrase: vp},
			"f:dfc341f78108bf201ab62c71b0668c919c34a4998ceb3daa80b13587c04dcfea"},
		{"only the last segment is normalised", `a\\b:c\\d`, Options{CaseSensitive: true}, `a\\b:c/d`},
		{"f: test comes after normalisation", `f:A\\B`, Options{}, "f:A/B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromPath(tt.path, tt.o); got != tt.want {
				t.Errorf("FromPath(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a/b.md", "a/b.md"},
		{`a\b\c.md`, "a/b/c.md"},
		{"a//b///c.md", "a/b/c.md"},
		{`a\/\b`, "a/b"},
		{"/lead//", "/lead/"},
		{`i:.obsidian\\x`, "i:.obsidian/x"},
		{`p\\q:r//s`, `p\\q:r/s`},
		{" trailing space ", " trailing space "},
		{"Cafe\u0301", "Cafe\u0301"}, // no Unicode normalisation
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := Normalize(tt.want); got != tt.want {
			t.Errorf("Normalize is not idempotent on %q: %q", tt.want, got)
		}
	}
}

func TestToPath(t *testing.T) {
	tests := []struct {
		id   string
		want string
		ok   bool
	}{
		{"readme.md", "readme.md", true},
		{"/_underscore.md", "_underscore.md", true},
		{"/plain", "plain", true}, // id2path_base drops any leading '/'
		{"//x", "/x", true},       // one '/' is dropped, then the path is normalised
		{`a\b`, "a/b", true},
		{"i:.obsidian/app.json", "i:.obsidian/app.json", true},
		{"ix:dev/CONFIG/app.json%x", "ix:dev/CONFIG/app.json%x", true},
		{"with:colon.md", "with:colon.md", true},
		{"f:0a0233f5a64be220451abc7685161dc49e463c7f94ec8833dfa4c1c06effbeb0", "", false},
		{"i:f:4d11718c2982c0cb8417a3c408108bdb68dc6a43994553e90d4705a65f267c9b", "", false},
		{"h:1a2b3c", "", false},
		{"h:+1a2b3c", "", false},
		{"obsydian_livesync_version", "", false},
		{"syncinfo", "", false},
		{"_design/chunks", "", false},
		{"_local/obsydian_livesync_milestone", "", false},
		{"a:b:c.md", "", false}, // id2path_base would return "a:b"
		{"a:", "", false},       // id2path_base would return "a"
		{"a::b", "", false},
		{"i:/_x", "", false}, // id2path_base would drop "i:"
		{"", "", false},
		{"/", "", false},
	}
	for _, tt := range tests {
		got, ok := ToPath(tt.id)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ToPath(%q) = %q, %v; want %q, %v", tt.id, got, ok, tt.want, tt.ok)
		}
	}
}

func TestKinds(t *testing.T) {
	tests := []struct {
		id                                string
		chunk, system, obfuscated, hidden bool
	}{
		{"h:abc", true, false, false, false},
		{"h:+abc", true, false, false, false},
		{"notes/a.md", false, false, false, false},
		{"/_templates/a.md", false, false, false, false},
		{"obsydian_livesync_version", false, true, false, false},
		{"obsidian_livesync_version", false, false, false, false},
		{"syncinfo", false, true, false, false},
		{"syncinfo.md", false, false, false, false},
		{"_design/chunks", false, true, false, false},
		{"_local/obsydian_livesync_milestone", false, true, false, false},
		{"f:0a0233f5", false, false, true, false},
		{"i:f:4d11718c", false, false, true, true},
		{"with:f:840a3bad", false, false, true, false},
		{"i:.obsidian/app.json", false, false, false, true},
		{"ix:dev/CONFIG/app.json%x", false, false, false, false},
		{"", false, false, false, false},
	}
	for _, tt := range tests {
		if got := IsChunkID(tt.id); got != tt.chunk {
			t.Errorf("IsChunkID(%q) = %v", tt.id, got)
		}
		if got := IsSystemID(tt.id); got != tt.system {
			t.Errorf("IsSystemID(%q) = %v", tt.id, got)
		}
		if got := IsObfuscated(tt.id); got != tt.obfuscated {
			t.Errorf("IsObfuscated(%q) = %v", tt.id, got)
		}
		if got := IsHiddenFileID(tt.id); got != tt.hidden {
			t.Errorf("IsHiddenFileID(%q) = %v", tt.id, got)
		}
	}
}

func TestIsTargetPath(t *testing.T) {
	tests := []struct {
		path             string
		noHidden, hidden bool
	}{
		{"notes/a.md", true, true},
		{"_templates/a.md", true, true},
		{"with:colon.md", false, false},
		{"i:.obsidian/app.json", false, true},
		{".hidden-note.md", false, true},
		{"folder/.hidden.md", true, true}, // only a leading '.' counts
		{"i:a:b", false, false},
		{"ix:dev/CONFIG/app.json%x", true, true},
		{"i:ix:dev/x", true, true},
		{"ps:plugin", true, true},
		{"redflag.md", false, false},
		{"redflag2.md", false, false},
		{"redflag3.md", false, false},
		{"flag_rebuild.md", false, false},
		{"flag_fetch.md", false, false},
		{"sub/redflag.md", true, true},
		{"Redflag.md", true, true},
		{"livesync_log_2024.md", false, false},
		{"LIVESYNC_LOG_x.md", false, false},
		{"Livesync_log_x.md", true, true},
		{"logs/livesync_log_x.md", true, true},
	}
	for _, tt := range tests {
		if got := IsTargetPath(tt.path, false); got != tt.noHidden {
			t.Errorf("IsTargetPath(%q, false) = %v, want %v", tt.path, got, tt.noHidden)
		}
		if got := IsTargetPath(tt.path, true); got != tt.hidden {
			t.Errorf("IsTargetPath(%q, true) = %v, want %v", tt.path, got, tt.hidden)
		}
	}
}

// FuzzFromPath checks that no input panics, that ids are stable under
// re-normalisation, and that ToPath inverts FromPath for case-sensitive,
// non-obfuscated ids of ordinary paths.
func FuzzFromPath(f *testing.F) {
	for _, s := range []string{"", "README.md", "_a.md", `back\slash`, "a//b", "i:.obsidian/x", "with:colon",
		"f:x", "a:b:c", ":", "/x", "İΣ", "\xff", "h:abc", "syncinfo", "_design/x"} {
		f.Add(s)
	}
	plain := New(Options{CaseSensitive: true})
	lower := New(Options{})
	obf := New(Options{ObfuscationPassphrase: "fuzz"})
	f.Fuzz(func(t *testing.T, p string) {
		id := plain.FromPath(p)
		_ = lower.FromPath(p)
		oid := obf.FromPath(p)
		if !strings.HasPrefix(Normalize(p), PrefixObfuscated) && !IsObfuscated(oid) {
			t.Fatalf("obfuscated id %q of %q is not recognised", oid, p)
		}
		_, _ = ToPath(oid)
		_, _ = ToPath(p)
		if plain.FromPath(Normalize(p)) != id {
			t.Fatalf("FromPath(Normalize(%q)) != FromPath(%q)", p, p)
		}
		n := Normalize(p)
		if n == "" || strings.HasPrefix(n, "_") || strings.HasPrefix(n, "/") || strings.Count(n, ":") > 1 ||
			strings.HasSuffix(n, ":") || strings.Contains(n, ":/") || IsObfuscated(n) || IsChunkID(n) || IsSystemID(n) {
			return
		}
		if got, ok := ToPath(id); !ok || got != n {
			t.Fatalf("ToPath(FromPath(%q)) = %q, %v; want %q", p, got, ok, n)
		}
	})
}

func BenchmarkFromPath(b *testing.B) {
	const path = "Notes/Daily/2024-01-01 Meeting With The Team.md"
	cases := []struct {
		name string
		o    Options
	}{
		{"CaseInsensitive", Options{}},
		{"CaseSensitive", Options{CaseSensitive: true}},
		{"Obfuscated", Options{ObfuscationPassphrase: "vector-passphrase"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := New(c.o)
			b.SetBytes(int64(len(path)))
			for b.Loop() {
				_ = m.FromPath(path)
			}
		})
	}
}
