package vault

import (
	"context"
	"time"

	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// replicateJournal receives (pull), sends (push) or both (sync: receive
// first, send only if receiving succeeded) through l's journal; live, it
// polls until ctx ends.
func (v *Vault) replicateJournal(ctx context.Context, l *Link, dir replicate.Direction, o SyncOptions, r *run) (SyncResult, error) {
	l.jmu.Lock()
	l.run = r
	clear(l.lastKey)
	l.jmu.Unlock()
	defer func() {
		l.jmu.Lock()
		l.run = nil
		l.jmu.Unlock()
	}()
	j := l.journal
	if o.RetryQuarantined && dir&replicate.Pull != 0 {
		if err := j.ClearQuarantine(ctx); err != nil {
			return SyncResult{}, err
		}
	}
	if dir == replicate.Push {
		// A receive finds a wrong passphrase by itself (no pack opens);
		// a push alone would upload packs no other device can open.
		if err := l.checkJournalPassphrase(ctx); err != nil {
			return SyncResult{}, err
		}
	}
	if o.Live {
		return SyncResult{}, v.pollJournal(ctx, l, dir, o, r)
	}
	res, err := journalOnce(ctx, j, dir)
	if err == nil && res.PacksReceived > 0 {
		l.jmu.Lock()
		l.checked = true // the passphrase opened a pack
		l.jmu.Unlock()
	}
	out := l.journalResult(dir, res)
	if err != nil {
		return out, err
	}
	for i := range res.Quarantined {
		v.emit(Event{Kind: PackQuarantined, Remote: l.ID(), Quarantine: &res.Quarantined[i]})
	}
	out.Quarantined, err = j.Quarantined(ctx)
	return out, err
}

// journalOnce runs one receive, send or sync.
func journalOnce(ctx context.Context, j *journalsync.Journal, dir replicate.Direction) (journalsync.Result, error) {
	switch dir {
	case replicate.Pull:
		return j.Receive(ctx)
	case replicate.Push:
		return j.Send(ctx)
	}
	return j.Sync(ctx)
}

// journalResult maps a journal run onto the replicator's counts: records
// received or sent count as documents, as chunks do on CouchDB.
func (l *Link) journalResult(dir replicate.Direction, res journalsync.Result) SyncResult {
	l.jmu.Lock()
	defer l.jmu.Unlock()
	out := SyncResult{Journal: &res}
	if dir&replicate.Pull != 0 {
		n := res.DocsWritten + res.ChunksReceived
		last := l.lastKey[journalsync.Receiving]
		for _, q := range res.Quarantined {
			if q.Key == last {
				last = "" // not received: the replica keeps naming the last pack it applied
			}
		}
		out.Pull = replicate.Progress{Direction: replicate.Pull, DocsRead: n, DocsWritten: n, LastSeq: last}
	}
	if dir&replicate.Push != 0 {
		out.Push = replicate.Progress{Direction: replicate.Push, DocsRead: res.RecordsSent, DocsWritten: res.RecordsSent, LastSeq: l.lastKey[journalsync.Sending]}
	}
	return out
}

// pollJournal polls the journal every interval until ctx ends. A
// transport failure doubles the pause (up to MaxPollBackoff) and is
// retried (SyncRetrying); any other failure ends the sync. Every poll is
// reported (SyncPolled), and so is every pack quarantined on the way.
func (v *Vault) pollJournal(ctx context.Context, l *Link, dir replicate.Direction, o SyncOptions, r *run) error {
	interval := o.Interval
	if interval <= 0 {
		interval = v.opts.PollInterval
	}
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	failures := 0
	for {
		res, err := journalOnce(ctx, l.journal, dir)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := interval
		switch {
		case err == nil:
			failures = 0
			r.commit(ctx)
			v.emit(Event{Kind: SyncPolled, Remote: l.ID(), Journal: &res})
			for i := range res.Quarantined {
				v.emit(Event{Kind: PackQuarantined, Remote: l.ID(), Quarantine: &res.Quarantined[i]})
			}
		case replicate.IsTransport(err):
			failures++
			wait = PollBackoff(interval, failures)
			r.commit(ctx)
			v.emit(Event{Kind: SyncRetrying, Remote: l.ID(), Direction: dir, Retry: &Retry{Direction: dir, What: "poll", Delay: wait, Err: err}})
		default:
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PollBackoff is the pause after the n-th failure in a row: the interval
// doubled n times, at most MaxPollBackoff (and never less than the
// interval).
func PollBackoff(interval time.Duration, n int) time.Duration {
	d := interval
	for range n {
		if d >= MaxPollBackoff {
			break
		}
		d *= 2
	}
	return max(min(d, MaxPollBackoff), interval)
}
