package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/dump"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

const vectorsDir = "../../engine/testdata/vectors"

// cli runs the command in-process with the given environment.
func cli(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

type vectorFile struct {
	VaultPath string `json:"vaultPath"`
	SHA256    string `json:"sha256"`
	MTime     int64  `json:"mtime"`
}

func vectorFiles(t *testing.T) []vectorFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir, "vault-dump-plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Files []vectorFile `json:"files"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d.Files
}

// checkTree asserts that dir holds exactly the vault's input files, byte
// for byte, with the vault's mtimes.
func checkTree(t *testing.T, dir string) {
	t.Helper()
	files := vectorFiles(t)
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if n != len(files) {
		t.Errorf("%s holds %d files, want %d", dir, n, len(files))
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.VaultPath))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", f.VaultPath, err)
			continue
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: content differs from the input", f.VaultPath)
		}
		st, _ := os.Stat(p)
		if !st.ModTime().Equal(time.UnixMilli(f.MTime)) {
			t.Errorf("%s: mtime %v, want %v", f.VaultPath, st.ModTime(), time.UnixMilli(f.MTime))
		}
	}
}

func TestExportPluginDumps(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := cli(t, nil, "export", "--dump", "testdata/vault-plain.json", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "exported 9 files") {
		t.Errorf("stdout: %q", stdout)
	}
	checkTree(t, out)

	out = t.TempDir()
	env := map[string]string{"LIVESYNC_PASSPHRASE": "vector-passphrase"}
	code, _, stderr = cli(t, env, "export", "--dump", "testdata/vault-e2ee.json", "--out", out)
	if code != exitOK {
		t.Fatalf("e2ee: exit %d: %s", code, stderr)
	}
	checkTree(t, out)
}

func TestExportRefusesBadInput(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		dump  string
		want  int
		inErr string
	}{
		{"wrong passphrase", map[string]string{"LIVESYNC_PASSPHRASE": "wrong"}, "testdata/vault-e2ee.json", exitPassphrase, "passphrase is wrong"},
		{"no passphrase", nil, "testdata/vault-e2ee.json", exitFailed, "LIVESYNC_PASSPHRASE"},
		{"missing dump", nil, "does-not-exist.json", exitFailed, "does-not-exist.json"},
		{"malformed dump", nil, writeTemp(t, `{"rows": [ {"id": "x"`), exitFailed, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			code, _, stderr := cli(t, tc.env, "export", "--dump", tc.dump, "--out", out)
			if code != tc.want || !strings.Contains(stderr, tc.inErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.want, tc.inErr)
			}
			if strings.Contains(stderr, "vector-passphrase") {
				t.Fatal("stderr shows the passphrase")
			}
			entries, _ := os.ReadDir(out)
			if len(entries) != 0 {
				t.Errorf("output folder not empty after a failure: %d entries", len(entries))
			}
		})
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExportSkipsUnsafeAndBrokenFiles(t *testing.T) {
	dump := `[
	  {"_id":"h:1","type":"leaf","data":"ok\n"},
	  {"_id":"good.md","path":"good.md","children":["h:1"],"size":3,"type":"plain","ctime":1,"mtime":1},
	  {"_id":"../evil.md","path":"../evil.md","children":["h:1"],"size":3,"type":"plain","ctime":1,"mtime":1},
	  {"_id":"/abs.md","path":"/etc/abs.md","children":["h:1"],"size":3,"type":"plain","ctime":1,"mtime":1},
	  {"_id":"missing.md","path":"missing.md","children":["h:2"],"size":3,"type":"plain","ctime":1,"mtime":1},
	  {"_id":"size.md","path":"size.md","children":["h:1"],"size":9,"type":"plain","ctime":1,"mtime":1},
	  {"_id":"gone.md","path":"gone.md","children":["h:1"],"size":3,"type":"plain","ctime":1,"mtime":1,"deleted":true}
	]`
	root := t.TempDir()
	out := filepath.Join(root, "out")
	code, _, stderr := cli(t, nil, "export", "--dump", writeTemp(t, dump), "--out", out)
	if code != exitPartial {
		t.Fatalf("exit %d, want %d (partial): %s", code, exitPartial, stderr)
	}
	for _, name := range []string{"missing.md", "size.md"} {
		if !strings.Contains(stderr, name) {
			t.Errorf("stderr does not name %s: %s", name, stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "good.md")); err != nil || string(b) != "ok\n" {
		t.Errorf("good.md: %q %v", b, err)
	}
	for _, p := range []string{filepath.Join(root, "evil.md"), filepath.Join(out, "missing.md"), filepath.Join(out, "size.md"), filepath.Join(out, "gone.md")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

func TestImportExportRoundTrip(t *testing.T) {
	src := t.TempDir()
	if code, _, stderr := cli(t, nil, "export", "--dump", "testdata/vault-plain.json", "--out", src); code != 0 {
		t.Fatal(stderr)
	}
	for _, mode := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"plain", nil, nil},
		{"e2ee+obfuscation", []string{"--encrypt", "--obfuscate-paths"}, map[string]string{"LIVESYNC_PASSPHRASE": "s3cret"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dump := filepath.Join(t.TempDir(), "vault.json")
			args := append([]string{"import", "--dir", src, "--out", dump}, mode.args...)
			if code, _, stderr := cli(t, mode.env, args...); code != 0 {
				t.Fatalf("import: %s", stderr)
			}
			raw, _ := os.ReadFile(dump)
			if mode.env != nil && bytes.Contains(raw, []byte("Ünïcode")) {
				t.Error("an obfuscated dump shows a path in plaintext")
			}
			checkSystemDocs(t, dump, mode.env != nil, filepath.Base(src))
			out := t.TempDir()
			if code, _, stderr := cli(t, mode.env, "export", "--dump", dump, "--out", out); code != 0 {
				t.Fatalf("export: %s", stderr)
			}
			checkTree(t, out)
		})
	}
}

// checkSystemDocs: the dump has the version document, and a milestone the
// plugin accepts (its own node is accepted and its tweak values agree
// with PREFERRED); encrypted dumps have a 32-byte salt. vault is the
// vault_name the milestone must carry.
func checkSystemDocs(t *testing.T, dumpPath string, encrypted bool, vault string) {
	t.Helper()
	f, _ := os.Open(dumpPath)
	defer f.Close()
	docs, local, err := dump.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	haveVersion := false
	for _, d := range docs {
		if d.ID() == negotiate.VersionDocID {
			b, _ := d.MarshalJSON()
			v, _ := negotiate.ParseVersionDoc(b)
			if verdict, err := negotiate.CheckVersion(&v); err != nil || verdict != negotiate.VersionOK {
				t.Errorf("version document: %v %v", verdict, err)
			}
			haveVersion = true
		}
	}
	if !haveVersion {
		t.Error("no version document")
	}
	var ms *negotiate.Milestone
	var salt []byte
	for _, d := range local {
		b, _ := d.MarshalJSON()
		switch d.ID() {
		case negotiate.MilestoneDocID:
			ms, err = negotiate.ParseMilestone(b)
		case negotiate.SyncParametersDocID:
			var p negotiate.SyncParameters
			p, err = negotiate.ParseSyncParameters(b)
			if err == nil {
				salt, err = p.Salt()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if ms == nil || len(ms.AcceptedNodes) != 1 {
		t.Fatalf("milestone: %+v", ms)
	}
	me := ms.AcceptedNodes[0]
	pref := ms.TweakValues[negotiate.PreferredNode]
	if v := negotiate.Check(ms, me, negotiate.CouchDBChunkRange, pref, negotiate.CheckOptions{}); v.Err() != nil {
		t.Errorf("milestone check: %v", v.Err())
	}
	s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: "x"}, pref)
	if err != nil || s.Encrypt != encrypted || s.CustomChunkSize != 60 {
		t.Errorf("settings from the milestone: %+v %v", s, err)
	}
	if encrypted != (len(salt) == 32) {
		t.Errorf("salt of %d bytes, encrypted=%v", len(salt), encrypted)
	}
	// What the plugin writes: every tweak key but the unset tweakModified,
	// and the vault's name (the imported folder's).
	if want := negotiate.TemplateKeys()[:30]; !reflect.DeepEqual(pref.Keys(), want) || !reflect.DeepEqual(ms.TweakValues[me].Keys(), want) {
		t.Errorf("tweak keys: PREFERRED %v, own %v; want %v", pref.Keys(), ms.TweakValues[me].Keys(), want)
	}
	if got := ms.NodeInfo[me].VaultName; got != vault {
		t.Errorf("vault_name = %q, want %q", got, vault)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"export"}, {"import", "--dir", "x"}, {"export", "--bogus"}} {
		if code, _, _ := cli(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, _ := cli(t, nil, "import", "--dir", t.TempDir(), "--out", "x.json", "--encrypt"); code != exitUsage {
		t.Errorf("--encrypt without a passphrase: exit %d", code)
	}
}
