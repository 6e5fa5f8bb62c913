package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeUsers(t *testing.T) {
	h, err := hashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	good := `{"version":1,"admin":{"name":"admin","password_hash":"` + h + `"}}`
	if a, err := decodeUsers([]byte(good)); err != nil || a.Name != "admin" || a.PasswordHash != h {
		t.Fatalf("%+v, %v", a, err)
	}
	for _, tc := range []struct{ name, doc string }{
		{"not JSON", `{`},
		{"version", `{"version":2,"admin":{"name":"admin","password_hash":"` + h + `"}}`},
		{"no admin", `{"version":1}`},
		{"name", `{"version":1,"admin":{"name":"a:b","password_hash":"` + h + `"}}`},
		{"plaintext", `{"version":1,"admin":{"name":"admin","password_hash":"hunter2"}}`},
		{"malformed hash", `{"version":1,"admin":{"name":"admin","password_hash":"-pbkdf2:sha256-xx,s,1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeUsers([]byte(tc.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error quotes the file: %v", err)
			}
		})
	}
}

func TestDamagedUsersFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, usersFile), []byte("{garbage"), 0o600)
	out := &syncBuffer{}
	if code := run(t.Context(), []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, envOf(nil), out, nil); code != exitFailure {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), "users.json is damaged") || !strings.Contains(out.String(), "--reset-admin-password") {
		t.Fatalf("message: %s", out)
	}
	rn := start(t, []string{"--data-dir", dir, "--reset-admin-password"}, nil)
	rn.user, rn.pass = rn.credentials()
	rn.admin("GET", "/_all_dbs", nil, 200)
}

func TestServerUUIDIsStable(t *testing.T) {
	dir := t.TempDir()
	a, err := serverUUID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := serverUUID(dir)
	if err != nil || a != b || len(a) != 32 {
		t.Fatalf("%q then %q, %v", a, b, err)
	}
	os.WriteFile(filepath.Join(dir, serverFile), []byte(`{"uuid":"short"}`), 0o600)
	if _, err := serverUUID(dir); err == nil {
		t.Fatal("a damaged server.json was accepted")
	}
}

func TestHashPasswordFormat(t *testing.T) {
	h, err := hashPassword("pw")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimPrefix(h, "-pbkdf2:sha256-"), ",")
	if !strings.HasPrefix(h, "-pbkdf2:sha256-") || len(parts) != 3 || len(parts[0]) != 64 || len(parts[1]) != 32 || parts[2] != "1000" {
		t.Fatalf("hash %q", h)
	}
	if h2, _ := hashPassword("pw"); h2 == h {
		t.Fatal("two hashes of one password share a salt")
	}
}

// FuzzDecodeUsers: users.json is read at every start; no content makes
// it panic or accept a non-hash password.
func FuzzDecodeUsers(f *testing.F) {
	f.Add([]byte(`{"version":1,"admin":{"name":"admin","password_hash":"-pbkdf2:sha256-00ff,abc,10"}}`))
	f.Add([]byte(`{"version":1,"admin":{"name":"admin","password_hash":"x"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeUsers(b)
		if err == nil && (!strings.HasPrefix(a.PasswordHash, "-pbkdf2") || !validUserName(a.Name)) {
			t.Fatalf("accepted %+v", a)
		}
	})
}
