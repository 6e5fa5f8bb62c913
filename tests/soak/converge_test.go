package soak

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// faultStep is one fault of the cycle: applied at offset into the cycle,
// lifted after dur.
type faultStep struct {
	at, dur time.Duration
	name    string
	on, off func() error
}

// schedule is the cycle of faults: on the upstreams latency with jitter,
// resets, a black hole and a burst of 503s each; on the clients' side a
// light latency throughout (set in faults) and a few resets.
func (s *soak) schedule() []faultStep {
	var steps []faultStep
	add := func(at, dur time.Duration, name string, on, off func() error) {
		steps = append(steps, faultStep{at: at, dur: dur, name: name, on: on, off: off})
	}
	toxic := func(at, dur time.Duration, what string, p *faultnet.Proxy, name string, on func() error) {
		add(at, dur, what, on, func() error { return p.Remove(name) })
	}
	burst := func(at, dur time.Duration, what string, h *faultnet.HTTPProxy) {
		add(at, dur, what, func() error { h.Burst(1<<30, nil); return nil }, func() error { h.Stop(); return nil })
	}
	toxic(0, 12*time.Second, "couch latency 150±100 ms", s.couchTCP, "slow",
		func() error {
			return s.couchTCP.Latency("slow", faultnet.Down, 150*time.Millisecond, 100*time.Millisecond)
		})
	toxic(time.Second, 12*time.Second, "bucket latency 100±80 ms", s.s3TCP, "slow",
		func() error { return s.s3TCP.Latency("slow", faultnet.Down, 100*time.Millisecond, 80*time.Millisecond) })
	toxic(14*time.Second, 3*time.Second, "couch resets", s.couchTCP, "reset",
		func() error { return s.couchTCP.ResetPeer("reset", faultnet.Up, 0) })
	toxic(19*time.Second, 5*time.Second, "bucket black hole", s.s3TCP, "hole",
		func() error { return s.s3TCP.Timeout("hole", faultnet.Up, 0) })
	burst(26*time.Second, 5*time.Second, "couch 503 burst", s.couchHTTP)
	toxic(33*time.Second, time.Second, "client resets", s.front, "reset",
		func() error { return s.front.ResetPeer("reset", faultnet.Up, 0) })
	toxic(38*time.Second, 5*time.Second, "couch black hole", s.couchTCP, "hole",
		func() error { return s.couchTCP.Timeout("hole", faultnet.Up, 0) })
	if s.s3HTTP != nil {
		burst(45*time.Second, 5*time.Second, "bucket 503 burst", s.s3HTTP)
	}
	toxic(52*time.Second, 3*time.Second, "bucket resets", s.s3TCP, "reset",
		func() error { return s.s3TCP.ResetPeer("reset", faultnet.Up, 0) })
	return steps
}

// faults runs the schedule, cycle after cycle, until ctx ends.
func (s *soak) faults(ctx context.Context) {
	if err := s.front.Latency("light", faultnet.Down, 20*time.Millisecond, 15*time.Millisecond); err != nil {
		s.t.Error(err)
	}
	steps := s.schedule()
	type event struct {
		at   time.Duration
		step faultStep
		on   bool
	}
	var events []event
	for _, st := range steps {
		events = append(events, event{st.at, st, true}, event{st.at + st.dur, st, false})
	}
	slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })
	applied := 0
	for cycle := time.Now(); ; cycle = cycle.Add(faultCycle) {
		for _, e := range events {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(cycle.Add(e.at))):
			}
			f := e.step.off
			if e.on {
				f = e.step.on
				applied++
			}
			if err := f(); err != nil {
				s.t.Errorf("fault %q: %v", e.step.name, err)
			}
		}
		if applied == len(steps) {
			for _, st := range steps {
				s.t.Logf("fault in each %v cycle at +%v for %v: %s", faultCycle, st.at, st.dur, st.name)
			}
		}
	}
}

// liftFaults takes every fault away.
func (s *soak) liftFaults() {
	for _, p := range []*faultnet.Proxy{s.couchTCP, s.s3TCP, s.front} {
		p.RemoveAll()
	}
	for _, h := range []*faultnet.HTTPProxy{s.couchHTTP, s.s3HTTP} {
		if h != nil {
			h.Stop()
		}
	}
}

// convergeTimeout bounds the wait for every tree to agree.
const convergeTimeout = 4 * time.Minute

// converge has every client push what it has, waits until the relay
// holds nothing and both upstreams are level, has every client pull, and
// then checks every tree, again until they agree or the time is up.
func (s *soak) converge() {
	t := s.t
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	if err := s.pouch.call(map[string]any{"op": "stop"}, nil); err != nil {
		t.Fatalf("PouchDB clients' last push: %v", err)
	}
	for _, d := range s.cliW {
		if err := retryCLI(ctx, func() error { return d.replicate(ctx, "sync") }); err != nil {
			t.Fatalf("%s: last sync: %v", d.name, err)
		}
	}
	s.waitSettled(ctx)
	var rep struct {
		Unhandled int `json:"unhandled"`
		Wire      struct {
			Requests     int `json:"requests"`
			Failed       int `json:"failed"`
			ServerErrors int `json:"server_errors"`
		} `json:"wire"`
		Clients []pouchStats `json:"clients"`
	}
	if err := s.pouch.call(map[string]any{"op": "report"}, &rep); err != nil {
		t.Fatalf("PouchDB clients' last pull: %v", err)
	}
	for _, d := range append(append([]*cliDevice{}, s.cliW...), s.cliR...) {
		if err := retryCLI(ctx, func() error { return d.replicate(ctx, "pull") }); err != nil {
			t.Fatalf("%s: last pull: %v", d.name, err)
		}
	}
	var errs, violations int
	for _, c := range rep.Clients {
		errs += c.Errors
		violations += c.Violations
		if c.Incomplete != 0 {
			t.Errorf("PouchDB client %d: %d notes lack chunks after the last pull", c.Client, c.Incomplete)
		}
	}
	t.Logf("PouchDB clients: %d requests, %d failed and %d answered 5xx (retried by PouchDB), %d replication errors, %d rejections PouchDB left unhandled; %d chunks named by served metadata were missing on the relay",
		rep.Wire.Requests, rep.Wire.Failed, rep.Wire.ServerErrors, errs, rep.Unhandled, violations)
	if violations != 0 {
		t.Errorf("the relay served metadata before its chunks %d times", violations)
	}
	var diff string
	if !poll(ctx, 5*time.Second, func() bool { diff = s.compare(ctx, len(rep.Clients)); return diff == "" }) {
		t.Fatalf("the trees did not converge within %v: %s", convergeTimeout, diff)
	}
}

// retryCLI retries a CLI run a few times: the connections the faults cut
// may still be closing.
func retryCLI(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(2 * time.Second)
	}
	return err
}

// waitSettled waits until the relay holds nothing and both upstreams are
// live with no lag, twice in a row.
func (s *soak) waitSettled(ctx context.Context) {
	var last status
	calm := 0
	if !poll(ctx, time.Second, func() bool {
		st, err := s.r.status(ctx)
		if err != nil {
			calm = 0
			return false
		}
		last = st
		ok := st.Databases[0].HeldDocuments == 0
		for _, u := range st.Databases[0].Upstreams {
			ok = ok && u.State == "live" && u.Lag == 0
		}
		if ok {
			calm++
		} else {
			calm = 0
		}
		return calm >= 2
	}) {
		s.t.Fatalf("the relay did not settle (held 0, upstreams live with no lag): %+v", last)
	}
}

// compare returns "" when every tree agrees: the files the writers
// wrote = the relay's = each upstream's = each CLI device's, and each
// PouchDB client's and the CouchDB upstream's documents (id and winning
// revision, chunks aside) = the relay's.
func (s *soak) compare(ctx context.Context, pouchClients int) string {
	want := s.expected()
	relayCLI := s.relayCLI
	couchCLI := s.couchCLI()
	s3CLI := &cli{bin: s.cliBin, home: relayCLI.home, env: []string{"LIVESYNC_S3_SECRET_KEY=" + s.srv.s3Secret, "LIVESYNC_PASSPHRASE=" + passphrase}}
	sides := []struct {
		name string
		c    *cli
		args []string
	}{
		{"relay", relayCLI, []string{withUser(s.r.url+"/vault", "admin")}},
		{"couch upstream", couchCLI, []string{withUser(s.srv.couchURL+"/"+s.couch.Name(), s.srv.couchUser)}},
		{"bucket upstream", s3CLI, []string{s.bucketURL()}},
	}
	for _, d := range append(append([]*cliDevice{}, s.cliW...), s.cliR...) {
		sides = append(sides, struct {
			name string
			c    *cli
			args []string
		}{"CLI " + d.name, d.c, []string{"--store", d.store}})
	}
	for _, sd := range sides {
		out, err := os.MkdirTemp(relayCLI.home, "export-")
		if err != nil {
			return err.Error()
		}
		defer os.RemoveAll(out)
		if _, err := sd.c.run(ctx, "", append(append([]string{"export"}, sd.args...), "--out", out, "--quiet")...); err != nil {
			return fmt.Sprintf("%s: %v", sd.name, err)
		}
		if d := treeDiff(want, readTree(out)); d != "" {
			return sd.name + ": " + d
		}
	}
	relayDocs, err := docLines(ctx, s.r.url+"/vault", "admin", s.r.password)
	if err != nil {
		return err.Error()
	}
	couchDocs, err := docLines(ctx, s.srv.couchURL+"/"+s.couch.Name(), s.srv.couchUser, s.srv.couchPassword)
	if err != nil {
		return err.Error()
	}
	if !slices.Equal(relayDocs, couchDocs) {
		return fmt.Sprintf("the CouchDB upstream's documents differ from the relay's (%d, %d)", len(couchDocs), len(relayDocs))
	}
	for i := range pouchClients {
		b, err := os.ReadFile(filepath.Join(s.pouch.dir, fmt.Sprintf("client-%d.txt", i)))
		if err != nil {
			return err.Error()
		}
		if got := strings.Split(string(b), "\n"); !slices.Equal(got, relayDocs) {
			return fmt.Sprintf("PouchDB client %d has %d documents, the relay %d, or other revisions", i, len(got), len(relayDocs))
		}
	}
	return ""
}

// couchCLI runs the CLI with the CouchDB test server's password.
func (s *soak) couchCLI() *cli {
	return &cli{bin: s.cliBin, home: s.relayCLI.home, env: []string{"LIVESYNC_PASSWORD=" + s.srv.couchPassword, "LIVESYNC_PASSPHRASE=" + passphrase}}
}

// bucketURL is the bucket upstream for the CLI.
func (s *soak) bucketURL() string {
	u := "s3://" + s.srv.s3Access + "@" + s.srv.s3Endpoint + "/" + s.bucket + "/vault/?region=" + s.srv.s3Region
	if s.srv.s3Secure {
		u += "&tls=1"
		if f := os.Getenv("LIVESYNC_TEST_S3_CA_FILE"); f != "" {
			u += "&ca-file=" + f
		}
	}
	return u
}

// expected is what the writers wrote: path -> sha256 of the last text of
// every note not deleted.
func (s *soak) expected() map[string]string {
	want := map[string]string{}
	add := func(ns []*note) {
		for _, n := range ns {
			if !n.deleted {
				want[n.path] = fmt.Sprintf("%x", sha256.Sum256([]byte(n.text)))
			}
		}
	}
	for _, w := range s.writers {
		add(w.notes)
	}
	for _, d := range s.cliW {
		add(d.notes)
	}
	return want
}

// readTree is path -> sha256 of every file under dir.
func readTree(dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	return out
}

func treeDiff(want, got map[string]string) string {
	var d []string
	for p, h := range want {
		if g, ok := got[p]; !ok {
			d = append(d, "missing "+p)
		} else if g != h {
			d = append(d, "other content in "+p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			d = append(d, "extra "+p)
		}
	}
	if len(d) == 0 {
		return ""
	}
	slices.Sort(d)
	return fmt.Sprintf("%d differences (of %d files), e.g. %s", len(d), len(want), strings.Join(d[:min(len(d), 5)], ", "))
}

// docLines is a CouchDB-protocol database's "id rev" lines (winning
// revisions, chunks aside), sorted.
func docLines(ctx context.Context, dbURL, user, password string) ([]string, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", dbURL+"/_all_docs", nil)
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var all struct {
		Rows []struct {
			ID    string `json:"id"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &all); err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s/_all_docs: %d %v", dbURL, resp.StatusCode, err)
	}
	var out []string
	for _, r := range all.Rows {
		if !strings.HasPrefix(r.ID, "h:") && !strings.HasPrefix(r.ID, "_design/") {
			out = append(out, r.ID+" "+r.Value.Rev)
		}
	}
	slices.Sort(out)
	return out, nil
}
