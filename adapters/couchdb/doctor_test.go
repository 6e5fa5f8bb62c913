package couchdb

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// fakeCouch answers the read-only requests of Doctor for an empty, new
// database (missing: the database does not exist), and fails the test
// on any write.
func fakeCouch(t *testing.T, missing bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet && !(r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_changes")) {
			t.Errorf("Doctor sent %s %s: it must not write", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		switch p := r.URL.Path; {
		case p == "/":
			fmt.Fprint(w, `{"couchdb":"Welcome","version":"3.5.0","vendor":{"name":"Apache"}}`)
		case p == "/vault" && !missing:
			fmt.Fprint(w, `{"db_name":"vault","doc_count":0,"update_seq":"0"}`)
		case p == "/vault/_changes" && !missing:
			fmt.Fprint(w, `{"results":[],"last_seq":"0","pending":0}`)
		case p == "/_node/_local/_config":
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":"forbidden"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"not_found","reason":"missing"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDoctorNewDatabase(t *testing.T) {
	db, err := New(Config{URL: fakeCouch(t, false).URL, Database: "vault"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := db.Doctor(t.Context(), doctor.Options{NewVault: negotiate.NewVaultTweaks()})
	want := []struct{ check, status string }{
		{"server", vault.FindingOK}, {"database", vault.FindingOK}, {"version", vault.FindingOK}, {"salt", vault.FindingOK},
		{"milestone", vault.FindingOK}, {"passphrase", vault.FindingOK}, {"chunks", vault.FindingOK}, {"server settings", vault.FindingSkipped},
	}
	if len(got) != len(want) {
		t.Fatalf("findings %+v", got)
	}
	for i, w := range want {
		if got[i].Check != w.check || got[i].Status != w.status {
			t.Errorf("finding %d = %s %s (%s), want %s %s", i, got[i].Check, got[i].Status, got[i].Message, w.check, w.status)
		}
	}
}

// A missing database is a problem with the caller's code, and its advice
// names the caller's push command.
func TestDoctorMissingDatabase(t *testing.T) {
	db, err := New(Config{URL: fakeCouch(t, true).URL, Database: "vault"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := db.Doctor(t.Context(), doctor.Options{
		Codes:   doctor.Codes{Failed: 13, Unreachable: 14, Auth: 15, Passphrase: 16, Refused: 17},
		Command: func(a doctor.Action) []string { return []string{"push", "vault"} },
		Line:    func(args []string) string { return "tool " + strings.Join(args, " ") },
	})
	last := got[len(got)-1]
	if last.Check != "database" || last.Status != vault.FindingProblem || last.Code != 17 ||
		len(last.Commands) != 1 || !strings.Contains(last.Advice, "tool push vault") {
		t.Fatalf("findings %+v", got)
	}
}
