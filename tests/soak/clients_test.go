package soak

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesync"
)

// The clients: PouchDB devices in one node process (soak-client.mjs),
// some of them writers fed by Go, and livesync CLI processes, each a
// device with its own replica, writing (put, rm, sync) or reading (pull).

// counters are what the clients did, for the report.
type counters struct {
	creates, edits, deletes atomic.Int64 // notes written
	cliRuns, cliFailures    atomic.Int64 // CLI syncs and pulls, and those that failed
}

// pouch is the node process of the PouchDB clients.
type pouch struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	mu   sync.Mutex
	errs strings.Builder
	dir  string
}

func startPouch(t *testing.T, url, user, password string, clients int) *pouch {
	t.Helper()
	p := &pouch{dir: t.TempDir()}
	p.cmd = exec.Command("node", "soak-client.mjs", "--url", url, "--db", "vault", "--clients", fmt.Sprint(clients), "--out", p.dir)
	p.cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+password)
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, b: &p.errs}
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 64<<10), 16<<20)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.in.Close(); p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 1<<20 {
		w.b.Write(p)
	}
	return len(p), nil
}

// call sends a command and decodes its answer into v.
func (p *pouch) call(cmd any, v any) error {
	b, _ := json.Marshal(cmd)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("soak-client: %v; stderr: %s", err, p.errs.String())
	}
	if !p.out.Scan() {
		return fmt.Errorf("soak-client exited: %v; stderr: %s", p.out.Err(), p.errs.String())
	}
	var head struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	line := p.out.Bytes()
	if err := json.Unmarshal(line, &head); err != nil || !head.OK {
		return fmt.Errorf("soak-client %s: %v %s", b[:min(len(b), 40)], err, head.Error)
	}
	if v != nil {
		return json.Unmarshal(line, v)
	}
	return nil
}

// exit closes stdin and waits for the process.
func (p *pouch) exit() error {
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return fmt.Errorf("soak-client did not exit")
	}
}

// pouchStats is a client's line of the stats and report answers.
type pouchStats struct {
	Client     int    `json:"client"`
	Pulled     int    `json:"pulled"`
	Fetched    int    `json:"fetched"`
	Errors     int    `json:"errors"`
	Pending    int    `json:"pending"`
	Docs       int    `json:"docs"`
	Incomplete int    `json:"incomplete"`
	Violations int    `json:"violations"`
	LastError  string `json:"last_error"`
}

// note is a writer's view of one of its notes.
type note struct {
	path    string
	revs    []string // revision hashes, newest first
	deleted bool
	text    string // the last text written
}

// noteText is a note of about 1 to 6 KB.
func noteText(r *rand.Rand, path string, edit int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s\nedit %d at %s\n", path, edit, time.Now().Format(time.RFC3339Nano))
	words := []string{"relay", "chunk", "vault", "note", "sync", "held", "upstream", "bucket", "journal", "soak", "fault", "latency"}
	for n := 1000 + r.IntN(5000); sb.Len() < n; {
		sb.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			sb.WriteString(".\n")
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

// pouchWriter writes its own notes (pw<i>/…) through PouchDB client i:
// documents encoded in Go as the plugin encodes them, loaded into the
// client's database, pushed by its live sync.
type pouchWriter struct {
	p      *pouch
	client int
	codec  *livesync.Codec
	notes  []*note
	r      *rand.Rand
	c      *counters
}

func (w *pouchWriter) step() error {
	n, op := pickOp(w.r, len(w.notes), func(i int) bool { return w.notes[i].deleted })
	if n < 0 {
		n = len(w.notes)
		w.notes = append(w.notes, &note{path: fmt.Sprintf("pw%d/note-%03d.md", w.client, n)})
	}
	nt := w.notes[n]
	docs, err := w.docs(nt, op == opDelete)
	if err != nil {
		return err
	}
	if err := w.p.call(map[string]any{"op": "load", "client": w.client, "docs": docs}, nil); err != nil {
		return err
	}
	countOp(w.c, op)
	return nil
}

type opKind int

const (
	opCreate opKind = iota
	opEdit
	opDelete
)

// pickOp chooses what a writer does next: a new note while it has fewer
// than 25, else mostly edits, some deletions, and deleted notes come
// back. It returns the note's index (-1: a new one) and the operation.
func pickOp(r *rand.Rand, count int, deleted func(int) bool) (int, opKind) {
	if count < 25 && r.IntN(3) == 0 || count == 0 {
		return -1, opCreate
	}
	i := r.IntN(count)
	if deleted(i) {
		return i, opCreate
	}
	if r.IntN(6) == 0 {
		return i, opDelete
	}
	return i, opEdit
}

func countOp(c *counters, op opKind) {
	switch op {
	case opCreate:
		c.creates.Add(1)
	case opEdit:
		c.edits.Add(1)
	default:
		c.deletes.Add(1)
	}
}

// docs is the next revision of nt (a soft deletion when del, as the
// plugin deletes) and its chunks, in the remote form.
func (w *pouchWriter) docs(nt *note, del bool) ([]json.RawMessage, error) {
	now := time.Now().UnixMilli()
	text := noteText(w.r, nt.path, len(nt.revs))
	m, cs, err := w.codec.FileDocs(nt.path, []byte(text), now, now)
	if err != nil {
		return nil, err
	}
	if del {
		m.Children, m.Size, m.Deleted, cs = nil, 0, true, nil
	}
	var out []json.RawMessage
	for _, c := range cs {
		d, err := w.codec.EncodeRemote(livesync.ChunkDoc(c))
		if err != nil {
			return nil, err
		}
		sum := md5.Sum([]byte(c.ID))
		h := hex.EncodeToString(sum[:])
		d["_rev"] = json.RawMessage(`"1-` + h + `"`)
		d["_revisions"] = json.RawMessage(fmt.Sprintf(`{"start":1,"ids":[%q]}`, h))
		b, _ := json.Marshal(d)
		out = append(out, b)
	}
	d, err := w.codec.EncodeRemote(m.Doc())
	if err != nil {
		return nil, err
	}
	var h [16]byte
	for i := range h {
		h[i] = byte(w.r.UintN(256))
	}
	nt.revs = append([]string{hex.EncodeToString(h[:])}, nt.revs...)
	nt.deleted, nt.text = del, text
	gen := len(nt.revs)
	d["_rev"], _ = json.Marshal(fmt.Sprintf("%d-%s", gen, nt.revs[0]))
	d["_revisions"], _ = json.Marshal(map[string]any{"start": gen, "ids": nt.revs})
	b, _ := json.Marshal(d)
	return append(out, b), nil
}

// cliDevice is a livesync CLI device: its replica, and the relay's URL
// (through the clients' proxy).
type cliDevice struct {
	c      *cli
	name   string
	store  string
	remote string
	notes  []*note
	r      *rand.Rand
	cnt    *counters
}

func newCLIDevice(c *cli, name, remote string, seed uint64, cnt *counters) *cliDevice {
	return &cliDevice{c: c, name: name, store: filepath.Join(c.home, name+".db"), remote: remote,
		r: rand.New(rand.NewPCG(seed, 7)), cnt: cnt}
}

// write makes one change in the replica (put or rm of one of its notes).
func (d *cliDevice) write(ctx context.Context) error {
	n, op := pickOp(d.r, len(d.notes), func(i int) bool { return d.notes[i].deleted })
	if n < 0 {
		n = len(d.notes)
		d.notes = append(d.notes, &note{path: fmt.Sprintf("%s/note-%03d.md", d.name, n)})
	}
	nt := d.notes[n]
	var err error
	text := noteText(d.r, nt.path, len(nt.revs))
	if op == opDelete {
		_, err = d.c.run(ctx, "", "rm", nt.path, "--store", d.store)
	} else {
		_, err = d.c.run(ctx, text, "put", nt.path, "-", "--store", d.store)
	}
	if err != nil {
		return err
	}
	nt.revs = append(nt.revs, "")
	nt.deleted, nt.text = op == opDelete, text
	countOp(d.cnt, op)
	return nil
}

// replicate runs sync (a writer) or pull (a reader) against the relay;
// a failure under faults is counted, and the next round tries again.
func (d *cliDevice) replicate(ctx context.Context, verb string) error {
	d.cnt.cliRuns.Add(1)
	_, err := d.c.run(ctx, "", verb, d.remote, "--store", d.store, "--quiet")
	if err != nil {
		d.cnt.cliFailures.Add(1)
	}
	return err
}
