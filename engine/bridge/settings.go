package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// errSettingsDiffer: an upstream's vault settings disagree with the
// vault's (see settingsDifferError).
var errSettingsDiffer = errors.New("the upstream's vault settings differ from the vault's")

// settingsDifferError names the must-match keys on which an upstream's
// milestone PREFERRED disagrees with the relay database's. Settings are
// not secrets; the message may show them.
type settingsDifferError struct {
	db, where string
	diffs     []negotiate.TweakDiff
}

func (e *settingsDifferError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the vault settings (milestone PREFERRED) of %s differ from the vault's in database %q: ", e.where, e.db)
	for i, d := range e.diffs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: vault %s, upstream %s", d.Key, d.Preferred, d.Current)
	}
	b.WriteString(". The relay overwrites neither side and does not replicate with this upstream: make them agree " +
		"(point the upstream at this vault's data, or change the settings on one side with a LiveSync client); the relay retries by itself")
	return b.String()
}

func (e *settingsDifferError) Unwrap() error { return errSettingsDiffer }

// relayMilestone reads the relay database's milestone (nil when it has
// none).
func (b *Bridge) relayMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	raw, err := store.LiveLocal(ctx, b.v, negotiate.MilestoneLocalID)
	if raw == nil || err != nil {
		return nil, err
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		return nil, fmt.Errorf("the relay database's milestone: %w", err)
	}
	return m, nil
}

// writeRelayMilestone stores m as the database's milestone (with
// nextLocalRev).
func (b *Bridge) writeRelayMilestone(ctx context.Context, m *negotiate.Milestone) error {
	c := m.Clone()
	c.ID, c.Rev = negotiate.MilestoneDocID, b.nextLocalRev(ctx, negotiate.MilestoneLocalID)
	if c.Type == "" {
		c.Type = negotiate.TypeMilestoneInfo
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return b.v.PutLocal(ctx, negotiate.MilestoneLocalID, doc)
}

// couchMilestone reads a CouchDB upstream's milestone (nil when absent).
func couchMilestone(ctx context.Context, db engine.Endpoint) (*negotiate.Milestone, error) {
	raw, err := db.GetLocal(ctx, negotiate.MilestoneLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		return nil, &engine.Error{Op: "read milestone", DocID: negotiate.MilestoneDocID, Stage: engine.StageDecode, Err: err}
	}
	return m, nil
}

// readUpstreamMilestone reads an upstream's milestone (nil when it has
// none).
func (u *upstream) readUpstreamMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	if u.couch != nil {
		return couchMilestone(ctx, u.couch)
	}
	return negotiate.ReadMilestone(ctx, u.port)
}

// adoptFirstSettings gives a relay database without a PREFERRED set the
// vault settings of the first upstream (in configuration order) whose
// milestone has one. Failures are logged; each upstream's handshake
// reconciles again.
func (b *Bridge) adoptFirstSettings(ctx context.Context) {
	rm, err := b.relayMilestone(ctx)
	if err != nil || negotiate.VaultOf(rm).HasPreferred {
		return
	}
	for _, u := range b.ups {
		cctx, cancel := context.WithTimeout(ctx, saltStepTimeout)
		m, err := u.readUpstreamMilestone(cctx)
		cancel()
		if err != nil || !negotiate.VaultOf(m).HasPreferred {
			continue
		}
		cctx, cancel = context.WithTimeout(ctx, saltStepTimeout)
		err = u.reconcileSettings(cctx)
		cancel()
		if err != nil {
			b.log.Warn("adopting an upstream's vault settings failed", "upstream", u.spec.Name, "err", err)
		} else {
			b.log.Info("the database had no vault settings: adopted the upstream's milestone", "upstream", u.spec.Name)
		}
		return
	}
}

// reconcileSettings brings the upstream's milestone and the relay
// database's into agreement (negotiate.Reconcile), writing the side(s)
// that must change. A must-match difference writes nothing and returns a
// *settingsDifferError.
func (u *upstream) reconcileSettings(ctx context.Context) error {
	b := u.b
	b.settingsMu.Lock()
	defer b.settingsMu.Unlock()
	rm, err := b.relayMilestone(ctx)
	if err != nil {
		return err
	}
	um, err := u.readUpstreamMilestone(ctx)
	if err != nil {
		return err
	}
	vault, remote := negotiate.VaultOf(rm), negotiate.VaultOf(um)
	res := negotiate.Reconcile(vault, remote, u.settingsBase)
	if len(res.Diffs) > 0 {
		return engine.Permanent(&settingsDifferError{db: b.db, where: "upstream " + strconv.Quote(u.spec.Name) + " (" + u.spec.Location + ")", diffs: res.Diffs})
	}
	if !res.Vault.Equal(vault) {
		var ranges map[string]negotiate.ChunkRange
		if um != nil {
			ranges = um.NodeChunkInfo
		}
		if rm == nil {
			rm = &negotiate.Milestone{ID: negotiate.MilestoneDocID, Type: negotiate.TypeMilestoneInfo, Created: time.Now().UnixMilli()}
		}
		rm.SetVault(res.Vault, ranges)
		if err := b.writeRelayMilestone(ctx, rm); err != nil {
			return fmt.Errorf("writing the vault settings to the relay database: %w", err)
		}
		u.log.Info("the relay database took vault settings from the upstream", "locked", res.Vault.Locked, "preferred", res.Vault.HasPreferred)
	}
	if !res.Remote.Equal(remote) {
		var ranges map[string]negotiate.ChunkRange
		if rm != nil {
			ranges = rm.NodeChunkInfo
		}
		if err := u.writeUpstreamSettings(ctx, um, res.Remote, ranges); err != nil {
			return fmt.Errorf("giving the upstream the vault settings: %w", err)
		}
		u.log.Info("the upstream took the vault settings", "locked", res.Remote.Locked, "preferred", res.Remote.HasPreferred)
	}
	base := res.Remote
	u.settingsBase = &base
	return nil
}

// writeUpstreamSettings writes the vault settings v into the upstream's
// milestone um (nil: a new one): last write wins on CouchDB, as the
// plugin writes it; a conditional update on a bucket, which rereads and
// refuses a PREFERRED that changed meanwhile.
func (u *upstream) writeUpstreamSettings(ctx context.Context, um *negotiate.Milestone, v negotiate.VaultSettings, ranges map[string]negotiate.ChunkRange) error {
	if u.couch != nil {
		m := um
		if m == nil {
			m = &negotiate.Milestone{ID: negotiate.MilestoneDocID, Type: negotiate.TypeMilestoneInfo, Created: time.Now().UnixMilli()}
		}
		m.SetVault(v, ranges)
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return u.couch.PutLocal(ctx, negotiate.MilestoneLocalID, withoutMeta(raw))
	}
	_, err := negotiate.UpdateMilestone(ctx, u.port, "", time.Now(), func(m *negotiate.Milestone, found bool) (bool, error) {
		cur := negotiate.VaultOf(m)
		if !found {
			cur = negotiate.VaultSettings{}
		}
		if cur.HasPreferred && v.HasPreferred {
			if d := negotiate.TweakMismatch(v.Preferred, cur.Preferred.WithDefaults()); len(d) > 0 {
				return false, &settingsDifferError{db: u.b.db, where: "upstream " + strconv.Quote(u.spec.Name), diffs: d}
			}
		}
		return m.SetVault(v, ranges) || !found, nil
	})
	return err
}

// SettingsChanged is called after a client wrote the database's
// milestone: the connected upstreams are reconciled soon after (by
// reconcileLoop).
func (b *Bridge) SettingsChanged() {
	select {
	case b.settingsWake <- struct{}{}:
	default:
	}
}

// reconcileLoop reconciles the connected upstreams whenever the relay
// database's milestone was written, until ctx ends. An upstream that now
// disagrees has its session ended, so that its next handshake reports
// the difference. When the milestone changed the vault codec's settings
// (the database rebuilt it), every session ends: they encode and re-encrypt
// with the codec they started with.
func (b *Bridge) reconcileLoop(ctx context.Context) {
	codecSettings := func() livesync.Settings {
		if c, _ := b.v.Codec(); c != nil {
			return c.Settings()
		}
		return livesync.Settings{}
	}
	last := codecSettings()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.settingsWake:
		}
		if cur := codecSettings(); cur != last {
			last = cur
			b.log.Info("the vault's settings changed its codec: the upstreams connect again")
			for _, u := range b.ups {
				u.endSession()
			}
		}
		for _, u := range b.ups {
			if u.chunks.Load() == nil {
				continue // not connected: its handshake reconciles
			}
			cctx, cancel := context.WithTimeout(ctx, saltStepTimeout)
			err := u.reconcileSettings(cctx)
			cancel()
			switch {
			case errors.Is(err, errSettingsDiffer):
				u.log.Warn("the upstream's vault settings no longer agree with the vault's: disconnecting", "err", err)
				u.endSession()
			case err != nil && ctx.Err() == nil:
				u.log.Warn("reconciling the vault settings failed; the next connection retries", "err", err)
			}
		}
	}
}
