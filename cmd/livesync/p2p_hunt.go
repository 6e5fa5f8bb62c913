package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine/vault"
)

// p2pHuntRemotes joins the group of spec (serving nothing), waits up to
// --wait for its approved peers, and attaches each one found read-only,
// for hunt --retry. The group is left when the last link closes. No
// approved peer is one failed remote, not an error of the command.
func (c *command) p2pHuntRemotes(rep *replica, spec remoteSpec, f p2pFlags) ([]huntRemote, error) {
	set, err := c.p2pSettings(f, spec.group, true)
	if err != nil {
		return nil, err
	}
	pass, err := c.groupPassphrase(f, &spec)
	if err != nil {
		return nil, err
	}
	sess, err := c.joinGroup(set, pass, nil)
	if err != nil {
		return nil, err
	}
	ids := c.awaitApproved(sess)
	if len(ids) == 0 {
		sess.Close()
		return []huntRemote{{remote: spec.String(), err: exitError{exitUnreachable, fmt.Sprintf(
			"no approved peer of group %s answered within %s (check that the other devices run `livesync p2p host`, share the group passphrase, and the Nostr relays)",
			safe(set.group), set.wait)}}}, nil
	}
	cfg, err := c.config()
	if err != nil {
		sess.Close()
		return nil, err
	}
	dev := deviceInfoFor(cfg.DeviceName, rep, spec)
	var mu sync.Mutex
	open := len(ids)
	release := func() {
		mu.Lock()
		open--
		last := open == 0
		mu.Unlock()
		if last {
			sess.Close()
		}
	}
	var out []huntRemote
	for _, id := range ids {
		r := sess.group.Remote(id)
		l, err := rep.v.Attach(c.ctx, r, vault.AttachOptions{ReadOnly: true, Device: &dev,
			Passphrase: func() (string, error) { return c.passphraseFor(&spec, c.cf) },
			Admit:      func(_ context.Context, lk vault.Locked) (bool, error) { return c.admit(spec, lk) }})
		if err != nil {
			r.Close()
			release()
			if refusedByPeer(err) {
				err = exitError{exitRefused, fmt.Sprintf("peer %s refused: this device is not approved there; on that device run `livesync p2p approve %s`", id, sess.id)}
			} else {
				err = &remoteError{remote: r.ID(), err: remoteErr(err)}
			}
			out = append(out, huntRemote{remote: r.ID(), err: err})
			continue
		}
		out = append(out, huntRemote{remote: l.ID(), link: &link{Link: l, v: rep.v, closed: release}})
	}
	return out, nil
}

// awaitApproved waits up to the session's wait for the approved peers
// of the book to be found, and returns those found (all of them as soon
// as every approved peer is).
func (c *command) awaitApproved(sess *p2pSession) []peer.ID {
	deadline := time.Now().Add(sess.set.wait)
	for {
		want := len(sess.book.Approved())
		var found []peer.ID
		for _, p := range sess.group.Peers() {
			if p.Approved && p.Present {
				found = append(found, p.ID)
			}
		}
		if (want > 0 && len(found) >= want) || time.Now().After(deadline) || c.ctx.Err() != nil {
			return found
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
