package vault

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

func isSystemID(id string) bool { return docid.IsSystemID(id) }

// openJournal opens the journal of a journal remote over the replica;
// the link is its Holder, Arrivals and Progress, passing them to the run
// in progress. Chunks are fetched by id through the journal's pack index
// only when the remote allows it (DirectFetcher, else Remote.Chunks not
// nil).
func (l *Link) openJournal(settings livesync.Settings, salt []byte, params negotiate.SyncParameters) error {
	var cipher journal.Cipher
	if settings.Encrypt {
		c, err := journalsync.CipherFor(settings, salt)
		if err != nil {
			return err
		}
		cipher = c
	}
	direct := l.remote.Chunks(l.codec) != nil
	if d, ok := l.remote.(DirectFetcher); ok {
		direct = d.DirectFetch()
	}
	j, err := journalsync.New(journalsync.Config{Local: l.v.st, Remote: l.remote.Objects(), Cipher: cipher,
		Epoch: negotiate.JournalEpoch(params), DirectFetch: direct, Log: l.v.log, Now: l.v.opts.Now,
		Activity: l.v.act, Holder: l, Arrivals: l, Progress: l.progress})
	if err != nil {
		return err
	}
	l.journal, l.cipher = j, cipher
	if direct {
		l.chunks = j.ChunkSource()
	}
	return nil
}

// Journal is a journal remote's journal (nil for a replication
// endpoint).
func (l *Link) Journal() *journalsync.Journal { return l.journal }

// ForgetCheckpoint drops what the replica remembers of a journal's
// content, as after the bucket was emptied: the next push sends every
// document. (A replication endpoint's checkpoints are on both sides; a
// reset removes the remote's, so there is nothing to do.)
func (l *Link) ForgetCheckpoint(ctx context.Context) error {
	if l.journal == nil {
		return nil
	}
	return l.journal.ResetCheckpoint(ctx)
}

// Hold passes a received metadata revision to the run in progress.
func (l *Link) Hold(ctx context.Context, r hold.Revision, source string) (hold.Outcome, error) {
	l.jmu.Lock()
	t := l.run
	l.jmu.Unlock()
	if t == nil {
		return hold.Held, nil
	}
	return t.Hold(ctx, r, l.ID())
}

// ChunksArrived passes received chunk ids to the run in progress.
func (l *Link) ChunksArrived(ids []engine.ChunkID) {
	l.jmu.Lock()
	t := l.run
	l.jmu.Unlock()
	if t != nil {
		t.ChunksArrived(ids)
	}
}

// progress is the journal's Progress: the newest pack key per direction,
// and an event.
func (l *Link) progress(p journalsync.Progress) {
	l.jmu.Lock()
	if l.lastKey == nil {
		l.lastKey = map[journalsync.Direction]string{}
	}
	l.lastKey[p.Direction] = p.Key
	run := l.run
	l.jmu.Unlock()
	e := Event{Kind: SyncProgress, Remote: l.ID(), Pack: &p}
	if run != nil {
		run.event(e)
		return
	}
	l.v.emit(e)
}

// checkJournalPassphrase opens one of the newest packs (up to three, in
// case one is damaged) with the cipher: a wrong passphrase opens none.
// Packs that fail for another reason say nothing either way.
func (l *Link) checkJournalPassphrase(ctx context.Context) error {
	l.jmu.Lock()
	done := l.cipher == nil || l.checked
	l.jmu.Unlock()
	if done {
		return nil
	}
	obj := l.remote.Objects()
	keys, err := obj.List(ctx, "")
	if err != nil {
		return err
	}
	const probes = 3
	failed := ""
	for i := len(keys) - 1; i >= 0 && i >= len(keys)-probes; i-- {
		err := openPack(ctx, obj, keys[i], l.cipher)
		switch {
		case err == nil:
			l.jmu.Lock()
			l.checked = true
			l.jmu.Unlock()
			return nil
		case errors.Is(err, engine.ErrDecrypt):
			failed = keys[i]
		case errors.Is(err, engine.ErrNotFound):
		default:
			var ee *engine.Error
			if errors.As(err, &ee) && (ee.Stage == engine.StageTransport || ee.Stage == engine.StageAuth) {
				return err
			}
		}
	}
	if failed != "" {
		return &PassphraseError{Remote: l.ID(), DocID: failed, What: "pack"}
	}
	return nil
}

// openPack downloads and opens one pack, discarding its records.
func openPack(ctx context.Context, obj journalsync.Objects, key string, c journal.Cipher) error {
	body, err := obj.Get(ctx, key)
	if err != nil {
		return err
	}
	return journal.OpenFunc(key, body, c, journal.DefaultInflateLimit, func(journal.Record) error { return nil })
}
