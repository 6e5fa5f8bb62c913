package livesyncrpc

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
)

// notifier tracks the legacy/onProgress calls of one peer: one in
// flight, and whether another is due when it returns.
type notifier struct {
	running, again bool
}

// NotifyProgress tells every peer present except exclude, if this peer
// accepts it, that this database changed (legacy/onProgress, which waits
// while the peer pulls), as the plugin's notifyProgress does. Calls run
// in the background, one at a time per peer; a notification arriving
// while one is in flight is sent once more when it returns. Close waits
// for them.
func (p *Peer) NotifyProgress(exclude string) {
	if p.room == nil {
		return
	}
	for _, ad := range p.Known() {
		if ad.PeerID == exclude {
			continue
		}
		peer := ad.PeerID
		p.notifyMu.Lock()
		if p.ctx.Err() != nil {
			p.notifyMu.Unlock()
			return
		}
		nt := p.notifiers[peer]
		if nt == nil {
			nt = &notifier{}
			p.notifiers[peer] = nt
		}
		if nt.running {
			nt.again = true
			p.notifyMu.Unlock()
			continue
		}
		nt.running = true
		p.wg.Add(1)
		p.notifyMu.Unlock()
		go p.notify(peer, nt)
	}
}

func (p *Peer) notify(peer string, nt *notifier) {
	defer p.wg.Done()
	for {
		if p.acceptable(p.ctx, peer) {
			_, _ = p.room.Call(p.ctx, peer, MethodOnProgress, p.cfg.SelfID)
		}
		p.notifyMu.Lock()
		if !nt.again || p.ctx.Err() != nil {
			nt.running = false
			p.notifyMu.Unlock()
			return
		}
		nt.again = false
		p.notifyMu.Unlock()
	}
}

// Broadcast makes this peer a broadcasting one until ctx ends or Close:
// legacy/getIsBroadcasting answers true, the peers are notified at once
// and after every later change to Config.DB (its changes feed, waited
// on), and after every batch pulled from a peer (the others are told).
// The plugin watches only ids sorting after "_local/"; this peer
// notifies for every change. It returns ctx's error, or the feed's.
func (p *Peer) Broadcast(ctx context.Context) error {
	if !p.broadcasting.CompareAndSwap(false, true) {
		return errors.New("livesyncrpc: already broadcasting")
	}
	defer p.broadcasting.Store(p.cfg.Broadcasting)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	info, err := p.cfg.DB.Info(ctx)
	if err != nil {
		return err
	}
	since := info.UpdateSeq
	p.NotifyProgress("")
	for {
		page, err := p.cfg.DB.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true})
		if err != nil {
			return err
		}
		if page.LastSeq != "" {
			since = page.LastSeq
		}
		if len(page.Results) > 0 {
			p.NotifyProgress("")
		}
	}
}

// Close stops Broadcast and the notifications in flight and waits for
// them. The Room is the caller's to close.
func (p *Peer) Close() error {
	p.notifyMu.Lock()
	p.progressMu.Lock()
	p.cancel()
	p.progressMu.Unlock()
	p.notifyMu.Unlock()
	p.wg.Wait()
	return nil
}
