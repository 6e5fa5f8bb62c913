package livesyncrpc

import (
	"context"
	"encoding/json"
	"fmt"
)

// callerMatches checks the caller id a legacy/ command names against the
// transport's sender. The plugin trusts the argument; this peer acts on
// the sender and refuses a request naming someone else.
func callerMatches(args []json.RawMessage, peer string) error {
	var caller string
	if err := arg(args, 0, &caller); err != nil {
		return err
	}
	if caller != "" && caller != peer {
		return fmt.Errorf("caller id %q is not the sender", caller)
	}
	return nil
}

func (p *Peer) handleReqAuth(ctx context.Context, peer string, args []json.RawMessage) (any, error) {
	if err := callerMatches(args, peer); err != nil {
		return false, nil
	}
	return p.acceptable(ctx, peer), nil
}

func (p *Peer) handleTweaks(_ context.Context, _ string, _ []json.RawMessage) (any, error) {
	return TweakSettings(p.cfg.Tweaks, p.cfg.Passphrase, p.cfg.Now()), nil
}

// syncAnswer is reqSync's answer: {ok:true}, or {error} where the plugin
// sends its Error object (JSON.stringify writes {}); this peer adds the
// message.
type syncAnswer struct {
	OK    bool           `json:"ok,omitempty"`
	Error *syncAnswerErr `json:"error,omitempty"`
}

type syncAnswerErr struct {
	Message string `json:"message"`
}

func (p *Peer) handleReqSync(ctx context.Context, peer string, args []json.RawMessage) (any, error) {
	if err := callerMatches(args, peer); err != nil {
		return syncAnswer{Error: &syncAnswerErr{err.Error()}}, nil
	}
	if _, err := p.Pull(ctx, peer, PullOptions{}); err != nil {
		return syncAnswer{Error: &syncAnswerErr{err.Error()}}, nil
	}
	return syncAnswer{OK: true}, nil
}

// handleOnProgress pulls from a followed peer that announces changes and
// answers (with no data, as the plugin) when a pull that started after
// the announcement has ended. The plugin runs one pull per announcement,
// one after another (TrysteroReplicator.onUpdateDatabase); this peer
// coalesces them, so a storm of announcements costs at most the pull
// running and one more.
func (p *Peer) handleOnProgress(ctx context.Context, peer string, args []json.RawMessage) (any, error) {
	if err := callerMatches(args, peer); err != nil {
		return nil, err
	}
	ad, ok := p.known(peer)
	if !ok || !p.follow.Match(ad.Name) {
		return nil, nil
	}
	if done := p.followPull(peer); done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return nil, nil
}

// follower holds the pulls that legacy/onProgress asked for from one
// peer: cur is closed when the running pull ends, next when the one
// queued after it ends.
type follower struct {
	cur, next chan struct{}
}

// followPull returns a channel closed when a pull from peer that starts
// from now on has ended, starting one if none runs; nil after Close.
func (p *Peer) followPull(peer string) <-chan struct{} {
	p.progressMu.Lock()
	defer p.progressMu.Unlock()
	if p.ctx.Err() != nil {
		return nil
	}
	if f := p.followers[peer]; f != nil {
		if f.next == nil {
			f.next = make(chan struct{})
		}
		return f.next
	}
	f := &follower{cur: make(chan struct{})}
	p.followers[peer] = f
	p.wg.Add(1)
	go p.followLoop(peer, f)
	return f.cur
}

func (p *Peer) followLoop(peer string, f *follower) {
	defer p.wg.Done()
	for {
		_, _ = p.Pull(p.ctx, peer, PullOptions{})
		p.progressMu.Lock()
		close(f.cur)
		if f.next == nil || p.ctx.Err() != nil {
			if f.next != nil {
				close(f.next)
			}
			delete(p.followers, peer)
			p.progressMu.Unlock()
			return
		}
		f.cur, f.next = f.next, nil
		p.progressMu.Unlock()
	}
}

func (p *Peer) handleAck(_ context.Context, peer string, args []json.RawMessage) (any, error) {
	var info *ProgressInfo
	if err := arg(args, 1, &info); err != nil {
		return nil, nil
	}
	p.progress(Progress{Peer: peer, Sending: true, Info: info})
	return nil, nil
}

func (p *Peer) handleIsBroadcasting(context.Context, string, []json.RawMessage) (any, error) {
	return p.broadcasting.Load(), nil
}

// handleRequestBroadcasting answers true when this peer broadcasts; a
// headless peer cannot ask its user, so it answers nothing otherwise (the
// plugin's answer after a refusal).
func (p *Peer) handleRequestBroadcasting(context.Context, string, []json.RawMessage) (any, error) {
	if p.broadcasting.Load() {
		return true, nil
	}
	return nil, nil
}
