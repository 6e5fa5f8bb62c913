package livesyncrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
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

// handleOnProgress pulls from a followed peer that announces changes,
// one pull per peer at a time, and answers (with no data, as the plugin)
// when it is done.
func (p *Peer) handleOnProgress(ctx context.Context, peer string, args []json.RawMessage) (any, error) {
	if err := callerMatches(args, peer); err != nil {
		return nil, err
	}
	ad, ok := p.known(peer)
	if !ok || !p.follow.Match(ad.Name) {
		return nil, nil
	}
	p.progressMu.Lock()
	mu := p.progressSerial[peer]
	if mu == nil {
		mu = &sync.Mutex{}
		p.progressSerial[peer] = mu
	}
	p.progressMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	_, _ = p.Pull(ctx, peer, PullOptions{})
	return nil, nil
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
