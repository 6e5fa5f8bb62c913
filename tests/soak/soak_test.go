// Package soak runs the relay for minutes (or, with LIVESYNC_SOAK, for as
// long as asked) with two upstreams and twenty clients while the network
// misbehaves, then checks that everything converged and that the relay's
// memory, goroutines and open files stayed flat.
package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// The cast: 3 PouchDB writers and 11 PouchDB readers in one node process,
// 2 CLI writers and 4 CLI readers.
const (
	pouchWriters = 3
	pouchReaders = 11
	cliWriters   = 2
	cliReaders   = 4
)

// The pace: modest, so that twenty clients, the relay, both servers and
// the proxies share two cores.
const (
	pouchWriteEvery = 2 * time.Second
	cliWriteEvery   = 4 * time.Second
	cliReadEvery    = 8 * time.Second
	sampleEvery     = 5 * time.Second
	faultCycle      = 60 * time.Second
)

// soakDuration is LIVESYNC_SOAK (a Go duration) or 3 minutes.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("LIVESYNC_SOAK")
	if v == "" {
		return 3 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		t.Fatalf("LIVESYNC_SOAK=%q: want a Go duration of at least 1m (e.g. 30m)", v)
	}
	return d
}

// soak is the whole setup.
type soak struct {
	t                 *testing.T
	srv               servers
	relayBin, cliBin  string
	couch             *couchdb.DB
	bucket            string
	couchTCP, s3TCP   *faultnet.Proxy
	front             *faultnet.Proxy // the clients' way to the relay
	couchHTTP, s3HTTP *faultnet.HTTPProxy
	r                 *relay
	codec             *livesync.Codec
	pouch             *pouch
	writers           []*pouchWriter
	cliW, cliR        []*cliDevice
	relayCLI          *cli
	cnt               counters
	ioErrs            sync.Map // first error of each kind seen by the loops, for the log
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak test runs for minutes")
	}
	begin := time.Now()
	dur := soakDuration(t)
	s := &soak{t: t, srv: needServers(t)}
	s.relayBin, s.cliBin = buildBins(t)
	s.setup()
	base := s.baseline()
	s.startClients()
	t.Logf("running %v: %d PouchDB writers, %d PouchDB readers, %d CLI writers (one on the CouchDB upstream), %d CLI readers; faults every %v",
		dur, pouchWriters, pouchReaders, cliWriters, cliReaders, faultCycle)

	smp := startSampler(s.r, sampleEvery)
	runStart := time.Now()
	s.run(dur)
	runEnd := time.Now()
	convStart := time.Now()
	s.converge()
	convTook := time.Since(convStart)
	t.Logf("converged %v after the writers stopped and the faults were lifted", convTook.Round(100*time.Millisecond))
	s.checkHeld()
	s.finishClients(base)
	samples := smp.close()
	s.flatness(samples, base, runStart, runEnd)
	t.Logf("ops: %d creates, %d edits, %d deletions; CLI: %d runs, %d failed under faults",
		s.cnt.creates.Load(), s.cnt.edits.Load(), s.cnt.deletes.Load(), s.cnt.cliRuns.Load(), s.cnt.cliFailures.Load())
	t.Logf("503s answered by the fault proxies: couch %d, bucket %d", s.couchHTTP.Failed(), failedOr0(s.s3HTTP))
	t.Logf("the whole test took %v", time.Since(begin).Round(time.Second))
}

// setup makes the upstreams' database and bucket, the proxies and the
// relay, and waits until both upstreams are live.
func (s *soak) setup() {
	t := s.t
	s.couch = s.srv.couchDB(t)
	s.bucket = s.srv.bucket(t)
	couchHost := strings.TrimPrefix(strings.TrimPrefix(s.srv.couchURL, "http://"), "https://")
	s.couchHTTP = newHTTPFaults(t, couchHost)
	s.couchTCP = newTCPProxy(t, strings.TrimPrefix(s.couchHTTP.URL(), "http://"))
	s3Scheme, s3Target := "", s.srv.s3Endpoint
	tlsLine := ""
	if s.srv.s3Secure {
		// HTTPS cannot be answered by the 5xx proxy; the bucket then
		// gets TCP faults only.
		s3Scheme = "https://"
		tlsLine = fmt.Sprintf("ca_file = %q\n", os.Getenv("LIVESYNC_TEST_S3_CA_FILE"))
	} else {
		s.s3HTTP = newHTTPFaults(t, s.srv.s3Endpoint)
		s3Target = strings.TrimPrefix(s.s3HTTP.URL(), "http://")
	}
	s.s3TCP = newTCPProxy(t, s3Target)
	ups := fmt.Sprintf("[[databases.upstreams]]\nname = \"couch\"\nkind = \"couchdb\"\nurl = %q\ndatabase = %q\nuser = %q\npassword_env = \"SOAK_COUCH\"\nmode = \"sync\"\n\n",
		s.couchTCP.URL(), s.couch.Name(), s.srv.couchUser) +
		fmt.Sprintf("[[databases.upstreams]]\nname = \"bucket\"\nkind = \"s3\"\nendpoint = %q\nbucket = %q\nprefix = \"vault/\"\nregion = %q\naccess_key = %q\nsecret_key_env = \"SOAK_S3\"\nmode = \"sync\"\npoll_interval = \"1s\"\ndirect_fetch = true\n%s\n",
			s3Scheme+s.s3TCP.Addr(), s.bucket, s.srv.s3Region, s.srv.s3Access, tlsLine)
	s.r = startRelay(t, s.relayBin, ups, "SOAK_COUCH="+s.srv.couchPassword, "SOAK_S3="+s.srv.s3Secret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last status
	if !poll(ctx, 200*time.Millisecond, func() bool {
		st, err := s.r.status(ctx)
		last = st
		if err != nil || len(st.Databases[0].Upstreams) != 2 {
			return false
		}
		for _, u := range st.Databases[0].Upstreams {
			if u.State != "live" {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the upstreams did not go live: %+v\n%s", last, s.r.output())
	}
	s.front = newTCPProxy(t, strings.TrimPrefix(s.r.url, "http://"))
	s.relayCLI = &cli{bin: s.cliBin, home: t.TempDir(), env: []string{"LIVESYNC_PASSWORD=" + s.r.password, "LIVESYNC_PASSPHRASE=" + passphrase}}
	rdb, err := couchdb.New(couchdb.Config{URL: s.front.URL(), Database: "vault", User: "admin", Password: s.r.password})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	salt, _, err := rdb.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "soak-writers", Settings: settings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	if s.codec, err = livesync.New(livesync.Config{Settings: settings, Salt: salt}); err != nil {
		t.Fatal(err)
	}
}

// startClients starts the node process and joins the CLI devices (a
// first pull each).
func (s *soak) startClients() {
	t := s.t
	s.pouch = startPouch(t, s.front.URL(), "admin", s.r.password, pouchWriters+pouchReaders)
	for i := range pouchWriters {
		s.writers = append(s.writers, &pouchWriter{p: s.pouch, client: i, codec: s.codec, r: rand.New(rand.NewPCG(uint64(i), 1)), c: &s.cnt})
	}
	remote := withUser(s.front.URL()+"/vault", "admin")
	for i := range cliWriters {
		s.cliW = append(s.cliW, newCLIDevice(s.relayCLI, fmt.Sprintf("cw%d", i), remote, uint64(100+i), &s.cnt))
	}
	// The last CLI writer is a device of the CouchDB upstream, not of the
	// relay: its notes reach the relay, its clients and the bucket over
	// the faulty link, through the relay's pull from the upstream.
	s.cliW[len(s.cliW)-1].c, s.cliW[len(s.cliW)-1].remote = s.couchCLI(), withUser(s.srv.couchURL+"/"+s.couch.Name(), s.srv.couchUser)
	for i := range cliReaders {
		s.cliR = append(s.cliR, newCLIDevice(s.relayCLI, fmt.Sprintf("cr%d", i), remote, uint64(200+i), &s.cnt))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, d := range append(append([]*cliDevice{}, s.cliW...), s.cliR...) {
		if _, err := d.c.run(ctx, "", "pull", d.remote, "--store", d.store, "--quiet"); err != nil {
			t.Fatalf("%s: first pull: %v", d.name, err)
		}
	}
}

// baseline is a sample before the load (upstreams live, clients idle).
func (s *soak) baseline() sample {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := s.r.sample(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// noteErr logs the first error of each loop, so a broken client shows
// without flooding the log.
func (s *soak) noteErr(who string, err error) {
	if _, dup := s.ioErrs.LoadOrStore(who, err); !dup {
		s.t.Logf("%s (first error; later ones only counted): %v", who, err)
	}
}

// run drives the writers, the readers and the faults for d.
func (s *soak) run(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	every := func(who string, period time.Duration, phase int, f func() error) {
		wg.Go(func() {
			// Spread the clients over the period.
			select {
			case <-ctx.Done():
				return
			case <-time.After(period * time.Duration(phase%7) / 7):
			}
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				if err := f(); err != nil && ctx.Err() == nil {
					s.noteErr(who, err)
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	for i, w := range s.writers {
		every(fmt.Sprintf("PouchDB writer %d", i), pouchWriteEvery, i, w.step)
	}
	for i, d := range s.cliW {
		every("CLI writer "+d.name, cliWriteEvery, i+3, func() error {
			// Not ctx: a command is never killed halfway, so each
			// writer knows what it wrote.
			if err := d.write(context.Background()); err != nil {
				return err
			}
			return d.replicate(context.Background(), "sync")
		})
	}
	for i, d := range s.cliR {
		every("CLI reader "+d.name, cliReadEvery, i, func() error { return d.replicate(context.Background(), "pull") })
	}
	wg.Go(func() { s.faults(ctx) })
	if d > 5*time.Minute {
		wg.Go(func() { s.progress(ctx, 5*time.Minute) })
	}
	wg.Wait()
	s.liftFaults()
}

// progress logs what was done so far every period, for the long form.
func (s *soak) progress(ctx context.Context, period time.Duration) {
	start := time.Now()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sm, err := s.r.sample(sctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.t.Logf("+%v: /metrics: %v", time.Since(start).Round(time.Second), err)
			}
			continue
		}
		s.t.Logf("+%v: %d notes written, %d deleted; relay heap %.1f MiB, rss %.1f MiB, %v goroutines, %v fds",
			time.Since(start).Round(time.Second), s.cnt.creates.Load()+s.cnt.edits.Load(), s.cnt.deletes.Load(),
			sm.heap/(1<<20), sm.rss/(1<<20), sm.goroutines, sm.fds)
	}
}
