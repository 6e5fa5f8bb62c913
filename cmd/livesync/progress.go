package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// progress shows how a replication advances: a bar on a terminal, plain
// lines ("pulled 100/302 docs") otherwise, nothing when quiet. Live runs
// print one line per bulk write ("pulled 2 docs"). It is safe for the
// concurrent callbacks of a live sync (one goroutine per direction).
type progress struct {
	w     io.Writer
	bar   bool // draw a bar (stderr is a terminal)
	quiet bool
	live  bool

	mu   sync.Mutex
	bars map[replicate.Direction]*progressbar.ProgressBar
	last map[replicate.Direction]replicate.Progress
	// printed records the directions that have printed a plain line.
	printed map[replicate.Direction]bool
}

func newProgress(env *cliEnv, quiet, live bool) *progress {
	return &progress{w: env.stderr, bar: env.stderrTerminal && !live, quiet: quiet, live: live,
		bars:    map[replicate.Direction]*progressbar.ProgressBar{},
		last:    map[replicate.Direction]replicate.Progress{},
		printed: map[replicate.Direction]bool{}}
}

// verb is "pulled" or "pushed".
func verb(d replicate.Direction) string {
	if d == replicate.Push {
		return "pushed"
	}
	return "pulled"
}

// total estimates the documents of a run: those read so far plus the
// changes the source says are left (-1 when it does not say).
func total(p replicate.Progress) int {
	if p.Pending < 0 {
		return -1
	}
	return p.DocsRead + p.Pending
}

// update is the replicator's Progress callback.
func (pr *progress) update(p replicate.Progress) {
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	last := pr.last[p.Direction]
	pr.last[p.Direction] = p
	switch {
	case pr.bar:
		b := pr.bars[p.Direction]
		max := int64(total(p))
		if b == nil {
			b = pr.newBar(p.Direction, max, verb(p.Direction), progressbar.OptionSetPredictTime(true))
		} else if max >= 0 && max != b.GetMax64() {
			b.ChangeMax64(max)
		}
		_ = b.Set64(int64(p.DocsRead))
	default:
		if (p.DocsRead == last.DocsRead && p.Pending == last.Pending && pr.printed[p.Direction]) || (p.DocsRead == 0 && p.Pending != 0) {
			return // nothing moved since the last line, or nothing to say yet
		}
		pr.printed[p.Direction] = true
		if t := total(p); t >= 0 {
			fmt.Fprintf(pr.w, "%s %d/%d docs\n", verb(p.Direction), p.DocsRead, t)
		} else {
			fmt.Fprintf(pr.w, "%s %d %s\n", verb(p.Direction), p.DocsRead, plural(p.DocsRead, "doc", "docs"))
		}
	}
}

// newBar starts the bar of direction dir.
func (pr *progress) newBar(dir replicate.Direction, max int64, desc string, more ...progressbar.Option) *progressbar.ProgressBar {
	o := append([]progressbar.Option{progressbar.OptionSetWriter(pr.w), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(100 * time.Millisecond), progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(pr.w) })}, more...)
	b := progressbar.NewOptions64(max, o...)
	pr.bars[dir] = b
	return b
}

// written is told the documents one bulk write of a live run stored;
// it prints them as one line.
func (pr *progress) written(dir replicate.Direction, n int) {
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	fmt.Fprintf(pr.w, "%s %d %s\n", verb(dir), n, plural(n, "doc", "docs"))
}

// pack is the journal's Progress callback: one line per pack received
// or sent (a bar over the packs on a terminal).
func (pr *progress) pack(p journalsync.Progress) {
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	dir := replicate.Pull
	if p.Direction == journalsync.Sending {
		dir = replicate.Push
	}
	if pr.bar {
		b := pr.bars[dir]
		max := int64(p.Total)
		if p.Total == 0 {
			max = -1
		}
		if b == nil {
			desc := "receiving packs"
			if dir == replicate.Push {
				desc = "sending packs"
			}
			b = pr.newBar(dir, max, desc)
		}
		_ = b.Set64(int64(p.Packs))
		return
	}
	if dir == replicate.Push {
		fmt.Fprintf(pr.w, "sent %d %s (%d records)\n", p.Packs, plural(p.Packs, "pack", "packs"), p.Docs+p.Chunks)
		return
	}
	fmt.Fprintf(pr.w, "received %d/%d packs (%d docs, %d chunks)\n", p.Packs, p.Total, p.Docs, p.Chunks)
}

// polled prints what one poll of a live run on a journal bucket moved
// (nothing when nothing moved).
func (pr *progress) polled(r journalsync.Result) {
	if pr.quiet {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if r.PacksReceived > 0 {
		fmt.Fprintf(pr.w, "received %d %s (%d docs, %d chunks)\n", r.PacksReceived, plural(r.PacksReceived, "pack", "packs"), r.DocsWritten, r.ChunksReceived)
	}
	if r.PacksSent > 0 {
		fmt.Fprintf(pr.w, "sent %d %s (%d records)\n", r.PacksSent, plural(r.PacksSent, "pack", "packs"), r.RecordsSent)
	}
}

// finish completes the bars.
func (pr *progress) finish() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, b := range pr.bars {
		if !b.IsFinished() {
			_ = b.Finish()
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
