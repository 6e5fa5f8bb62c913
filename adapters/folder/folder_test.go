package folder

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPath: which document paths export writes, skips or refuses.
func TestPath(t *testing.T) {
	for _, tc := range []struct {
		path   string
		hidden bool
		rel    string
		v      Verdict
	}{
		{"notes/a.md", false, "notes/a.md", Write},
		{"Ünïcode Ñame.md", false, "Ünïcode Ñame.md", Write},
		{"notes\\win.md", false, "notes/win.md", Write},
		{"a..b/c.md", false, "a..b/c.md", Write},
		{"ix:dev/CONFIG/x%y", true, "", Skip},
		{"ps:plugin", true, "", Skip},
		{"i:.obsidian/app.json", false, "", Skip},
		{"i:.obsidian/app.json", true, ".obsidian/app.json", Write},
		{"i:.obsidian/plugins/x/main.js", true, ".obsidian/plugins/x/main.js", Write},
		{".obsidian/plugins/x/main.js", true, "", Refuse},
		{"notes/.trash/a.md", false, "", Refuse},
		{".git/config", true, "", Refuse},
		{"i:.git/config", true, "", Refuse},
		{"i:sub/.git/hooks/pre-commit", true, "", Refuse},
		{"../evil.md", false, "", Refuse},
		{"a/../../evil.md", false, "", Refuse},
		{"a//b.md", false, "", Refuse},
		{"..", false, "", Refuse},
		{"", false, "", Refuse},
		{"bell\a.md", false, "", Refuse},
		{"nul\x00.md", false, "", Refuse},
		{"dir/", false, "", Refuse},
		{"/abs.md", false, "", Refuse},
		{"redflag.md", false, "", Skip},
		{"flag_fetch.md", false, "", Skip},
		{"livesync_log_2026.md", false, "", Skip},
		{"sub/redflag.md", false, "sub/redflag.md", Write},
	} {
		rel, v, why := Path(tc.path, tc.hidden)
		if rel != tc.rel || v != tc.v || (v == Refuse) != (why != "") {
			t.Errorf("Path(%q, %v) = %q, %v, %q; want %q, %v", tc.path, tc.hidden, rel, v, why, tc.rel, tc.v)
		}
	}
}

// List leaves out dot paths unless hidden, and VaultPath gives them
// Hidden File Sync's prefix; WriteFile writes inside the folder and
// refuses to follow a link out of it, which LinkOut names.
func TestListAndWrite(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a.md", "notes/b.md", ".obsidian/app.json"} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte("x"), 0o644)
	}
	if got, err := List(dir, false); err != nil || !slices.Equal(got, []string{"a.md", "notes/b.md"}) {
		t.Errorf("List = %q, %v", got, err)
	}
	if got, _ := List(dir, true); len(got) != 3 || VaultPath(got[0]) != "i:.obsidian/app.json" || VaultPath("a.md") != "a.md" {
		t.Errorf("List hidden = %q", got)
	}
	out, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(out)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteFile(root, "sub/c.md", []byte("c"), 1700000000000); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "sub", "c.md")); string(b) != "c" {
		t.Errorf("written %q", b)
	}
	if err := WriteFile(root, "link/evil.md", []byte("e"), 0); err == nil {
		t.Error("a write through a link out of the folder succeeded")
	}
	if why := LinkOut(root, "link/evil.md"); !strings.Contains(why, "link is a symbolic link to") {
		t.Errorf("LinkOut = %q", why)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside: %v", entries)
	}
}
