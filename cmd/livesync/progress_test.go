package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/replicate"
)

func TestProgressPlainLines(t *testing.T) {
	var b strings.Builder
	env := testEnv(nil)
	env.stderr = &b
	pr := newProgress(env, false, false)
	for _, p := range []replicate.Progress{
		{Direction: replicate.Pull, DocsRead: 100, DocsWritten: 100, Pending: 202},
		{Direction: replicate.Pull, DocsRead: 200, DocsWritten: 200, Pending: -1},
		{Direction: replicate.Pull, DocsRead: 302, DocsWritten: 302, Pending: 0},
		{Direction: replicate.Pull, DocsRead: 302, DocsWritten: 302, Pending: 0}, // nothing moved
		{Direction: replicate.Push, DocsRead: 0, Pending: -1},                    // nothing to say yet
		{Direction: replicate.Push, DocsRead: 1, DocsWritten: 1, Pending: -1},
	} {
		pr.update(p)
	}
	pr.finish()
	want := "pulled 100/302 docs\npulled 200 docs\npulled 302/302 docs\npushed 1 doc\n"
	if b.String() != want {
		t.Errorf("lines:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	pr = newProgress(env, true, false)
	pr.update(replicate.Progress{Direction: replicate.Pull, DocsRead: 1})
	if b.Len() != 0 {
		t.Errorf("quiet printed %q", b.String())
	}
}

// Live runs print what each bulk write stored.
func TestProgressLive(t *testing.T) {
	var b strings.Builder
	env := testEnv(nil)
	env.stderr = &b
	env.stderrTerminal = true // no bar for live runs, even on a terminal
	pr := newProgress(env, false, true)
	pr.written(replicate.Pull, 3)
	pr.written(replicate.Push, 1)
	pr.written(replicate.Pull, 2)
	want := "pulled 3 docs\npushed 1 doc\npulled 2 docs\n"
	if b.String() != want {
		t.Errorf("lines:\n%s\nwant:\n%s", b.String(), want)
	}
}

// On a terminal the bar is drawn on stderr (the progressbar library),
// never on stdout.
func TestProgressBar(t *testing.T) {
	var errb, outb strings.Builder
	env := testEnv(nil)
	env.stderr, env.stdout = &errb, &outb
	env.stderrTerminal = true
	pr := newProgress(env, false, false)
	pr.update(replicate.Progress{Direction: replicate.Pull, DocsRead: 50, Pending: 50})
	pr.update(replicate.Progress{Direction: replicate.Pull, DocsRead: 100, Pending: 0})
	pr.finish()
	if !strings.Contains(errb.String(), "pulled") || !strings.Contains(errb.String(), "100/100") || outb.Len() != 0 {
		t.Errorf("bar: stderr %q stdout %q", errb.String(), outb.String())
	}
}

func TestSummaryJSONShape(t *testing.T) {
	b, _ := json.Marshal(progressJSON(replicate.Progress{DocsRead: 3, DocsWritten: 2, WriteFailures: 1, LastSeq: "7"}))
	if string(b) != `{"docs_read":3,"docs_written":2,"last_seq":"7","write_failures":1}` {
		t.Errorf("%s", b)
	}
}
