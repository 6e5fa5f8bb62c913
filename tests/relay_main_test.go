package tests

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestRelayMain runs the livesync-relay binary as a user does: built with
// go build, started with no configuration in an empty working folder
// (only --listen, to take a free port), its URL and generated admin
// credentials read from what it prints, and used by the engine's CouchDB
// client for a LiveSync handshake and a push whose metadata is held until
// its chunks arrive. Then SIGTERM, a restart that resumes (and does not
// print the password again), SIGINT, and a second signal that forces the
// exit of a shutdown that waits.
func TestRelayMain(t *testing.T) {
	t.Parallel()
	bin := goBuildRelay(t)
	wd := t.TempDir()

	// First start.
	p := startRelayProcess(t, bin, wd)
	cred := relayCredentials(t, p)
	user, password := cred.user, cred.password
	if !strings.Contains(p.output(), "URI:            "+p.url) || !strings.Contains(p.output(), "Database name:  vault") {
		t.Fatalf("no plugin instructions:\n%s", p.output())
	}
	for _, f := range []string{"users.json", "server.json", "vault.db"} {
		fi, err := os.Stat(filepath.Join(wd, "livesync-data", f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("livesync-data/%s: %v %v", f, fi, err)
		}
	}

	ctx := ctxT(t)
	db, err := couchdb.New(couchdb.Config{URL: p.url, Database: "vault", User: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	settings := livesync.Settings{Encrypt: true, Passphrase: "relay-main-passphrase"}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "relay-main-test", Settings: settings.TweakValues()})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	meta, chunks := relayMainNote(t, codec, "Daily/Relay.md", "# From the test\nheld until its chunks arrive\n")
	// new_edits=false: CouchDB answers only the refused documents.
	if res, err := db.BulkDocs(ctx, []json.RawMessage{meta}); err != nil || slices.ContainsFunc(res, func(r engine.BulkDocResult) bool { return r.Error != "" }) {
		t.Fatalf("push metadata: %v %+v", err, res)
	}
	var head struct {
		ID string `json:"_id"`
	}
	json.Unmarshal(meta, &head)
	metaID := head.ID
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(page.Results, func(c engine.Change) bool { return c.ID == metaID }) {
		t.Fatal("metadata without its chunks is served")
	}
	if res, err := db.BulkDocs(ctx, chunks); err != nil || slices.ContainsFunc(res, func(r engine.BulkDocResult) bool { return r.Error != "" }) {
		t.Fatalf("push chunks: %v %+v", err, res)
	}
	relayMainWaitFor(t, db, metaID, page.LastSeq)

	for path, want := range map[string]int{"/healthz": 200, "/status": 401, "/metrics": 401} {
		if code := relayMainGet(t, p.url+path, "", ""); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	if code := relayMainGet(t, p.url+"/status", user, password); code != 200 {
		t.Errorf("GET /status as admin: %d", code)
	}

	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "held documents saved") {
		t.Errorf("no shutdown log:\n%s", p.output())
	}

	// Second start in the same folder: no password printed, data kept.
	p2 := startRelayProcess(t, bin, wd)
	if strings.Contains(p2.output(), password) || !strings.Contains(p2.output(), "admin password was printed at first start; reset with --reset-admin-password") {
		t.Fatalf("second start:\n%s", p2.output())
	}
	db2, err := couchdb.New(couchdb.Config{URL: p2.url, Database: "vault", User: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	page, err = db2.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(page.Results, func(c engine.Change) bool { return c.ID == metaID }) {
		t.Fatal("the note is gone after a restart")
	}
	if again, _, err := db2.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "relay-main-test", Settings: settings.TweakValues()}); err != nil || string(again) != string(salt) {
		t.Fatalf("handshake after a restart: %v, same salt %v", err, string(again) == string(salt))
	}

	// A request that never finishes keeps the shutdown waiting: a second
	// signal ends the process at once. The signal goes only once the
	// relay's handler reads the body (it asks for it with 100 Continue):
	// a request the relay has not read when the shutdown begins is
	// dropped with its connection (Go's server does that), and the
	// shutdown would have nothing to wait for.
	conn, err := net.Dial("tcp", strings.TrimPrefix(p2.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /vault/_bulk_docs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\nAuthorization: Basic %s\r\n\r\n",
		base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("the relay did not ask for the body: %q, %v", line, err)
	}
	fmt.Fprint(conn, `{"docs":[`)
	p2.cmd.Process.Signal(syscall.SIGINT)
	p2.waitFor(t, "shutting down")
	if code := p2.signal(syscall.SIGINT); code != 1 || !strings.Contains(p2.output(), "second signal") {
		t.Fatalf("exit %d after a second signal:\n%s", code, p2.output())
	}
}

// relayMainNote returns a file's metadata and chunks in the remote form,
// with the first revisions a replicator sends (new_edits=false).
func relayMainNote(t *testing.T, codec *livesync.Codec, path, text string) (json.RawMessage, []json.RawMessage) {
	t.Helper()
	m, cs, err := codec.FileDocs(path, []byte(text), 1700000000000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	withRev := func(d livesync.Doc) json.RawMessage {
		rd, err := codec.EncodeRemote(d)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rd)
		sum := md5.Sum(b)
		h := hex.EncodeToString(sum[:])
		rd["_rev"] = json.RawMessage(`"1-` + h + `"`)
		rd["_revisions"] = json.RawMessage(fmt.Sprintf(`{"start":1,"ids":[%q]}`, h))
		b, _ = json.Marshal(rd)
		return b
	}
	var chunks []json.RawMessage
	for _, c := range cs {
		chunks = append(chunks, withRev(livesync.ChunkDoc(c)))
	}
	return withRev(m.Doc()), chunks
}

// relayMainWaitFor waits with longpolls (no sleeps) until id is in the
// feed after since.
func relayMainWaitFor(t *testing.T, db *couchdb.DB, id, since string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true})
		if err != nil {
			t.Fatalf("waiting for %s in the feed: %v", id, err)
		}
		if slices.ContainsFunc(page.Results, func(c engine.Change) bool { return c.ID == id }) {
			return
		}
		since = page.LastSeq
	}
}

func relayMainGet(t *testing.T, url, user, password string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
