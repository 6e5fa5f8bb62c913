package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileDump is a plain dump whose documents a hostile writer to the
// remote could have left: a path through a folder that is a symbolic link
// in the output folder, dot-paths in normal documents (an Obsidian plugin,
// a git config), Hidden File Sync documents, and a path holding terminal
// escapes and a NUL.
func hostileDump(t *testing.T) string {
	t.Helper()
	leaf := map[string]any{"_id": "h:1", "type": "leaf", "data": "ok\n"}
	docs := []any{leaf}
	for _, p := range []string{
		"good.md",
		"escape/planted.md",
		".obsidian/plugins/x/main.js",
		".git/config",
		"notes/.hidden.md",
		"i:.obsidian/app.json",
		"i:.git/hooks/post-checkout",
		"i:.obsidian/../../outside.md",
		"title\x1b]0;pwned\a\x00.md",
	} {
		docs = append(docs, map[string]any{"_id": p, "path": p, "children": []string{"h:1"}, "size": 3,
			"type": "plain", "ctime": 1, "mtime": 1700000000000})
	}
	b, err := json.Marshal(docs)
	if err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, string(b))
}

// TestExportRefusesLinksAndDotPaths: export writes
// nothing outside --out, not through a folder symlink already there, and
// no dot-path of a normal document; it names each refusal on stderr
// (escaped) and still writes the other files. Hidden File Sync documents
// are written only with --hidden, and never into a .git folder.
func TestExportRefusesLinksAndDotPaths(t *testing.T) {
	dump := hostileDump(t)
	for _, hidden := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "hidden"}[hidden], func(t *testing.T) {
			work := t.TempDir()
			outside := filepath.Join(work, "outside")
			out := filepath.Join(work, "out")
			for _, d := range []string{outside, out} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(outside, filepath.Join(out, "escape")); err != nil {
				t.Fatal(err)
			}
			args := []string{"export", "--dump", dump, "--out", out, "--json"}
			if hidden {
				args = append(args, "--hidden")
			}
			code, stdout, stderr := cli(t, nil, args...)
			if code != exitPartial {
				t.Fatalf("exit %d, want %d (the planted path failed): %s", code, exitPartial, stderr)
			}
			if strings.ContainsAny(stderr, "\x1b\x00\a") || strings.ContainsAny(stdout, "\x1b\x00\a") {
				t.Errorf("raw control bytes in the output:\nstdout %q\nstderr %q", stdout, stderr)
			}
			for _, want := range []string{
				`skip escape/planted.md: escape is a symbolic link to ` + outside,
				`refused .obsidian/plugins/x/main.js`, `refused .git/config`, `refused notes/.hidden.md`,
				`refused title\x1b]0;pwned\a\x00.md`,
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("export wrote outside --out: %v", entries)
			}
			if _, err := os.Stat(filepath.Join(work, "outside.md")); err == nil {
				t.Error("export wrote outside.md beside --out")
			}
			got := map[string]bool{}
			filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					rel, _ := filepath.Rel(out, p)
					got[filepath.ToSlash(rel)] = true
				}
				return nil
			})
			want := map[string]bool{"good.md": true}
			if hidden {
				want[".obsidian/app.json"] = true
			}
			if len(got) != len(want) {
				t.Errorf("--out holds %v, want %v", got, want)
			}
			for p := range want {
				if !got[p] {
					t.Errorf("%s was not written (--out holds %v)", p, got)
				}
			}
			var res struct {
				Files, Refused, Failed, Skipped int
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("--json: %v: %q", err, stdout)
			}
			wantRefused, wantSkipped := 4, 3 // three dot-paths and the escapes; the i: documents
			if hidden {
				wantRefused, wantSkipped = 6, 0 // and .git/hooks, ../../outside.md
			}
			if res.Files != len(want) || res.Failed != 1 || res.Refused != wantRefused || res.Skipped != wantSkipped {
				t.Errorf("--json: %+v, want %d files, 1 failed, %d refused, %d skipped", res, len(want), wantRefused, wantSkipped)
			}
		})
	}
}
