package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// Vault settings travel with the vault (issue 14 item 1).
//
// A vault's settings live in its milestone (FORMAT.md §1.8): the
// PREFERRED tweak values (encryption, path obfuscation, chunking…), the
// lock (locked, cleaned, accepted_nodes), and per-node entries. A device
// reads PREFERRED on first contact to know how the vault is encoded. The
// bridge keeps the vault-wide parts the same on the relay database and on
// every upstream (negotiate.Reconcile); the per-node entries stay each
// remote's, since they describe the devices that connected to it.
//
//   - Where the truth comes from: the relay database's milestone once it
//     has a PREFERRED set. A relay database without one adopts the
//     milestone of the first upstream, in configuration order, that has
//     a PREFERRED set (before any upstream replicates), as it adopts the
//     first CouchDB upstream's salt.
//   - When: at every connection of an upstream (before its salt is
//     settled and before anything replicates), and whenever a client
//     writes the relay database's milestone (the upstreams connected at
//     that moment are reconciled at once).
//   - Disagreement: an upstream whose PREFERRED differs from the vault's
//     on a must-match key (negotiate.TweakMismatch) is not overwritten
//     and does not replicate: its state is "error", with the keys and
//     both values in last_error, retried with the usual backoff until
//     someone makes them agree.
//   - Sync parameters: the salt is settled by the handshakes
//     (couchHandshake, openJournal) as before: a same-salt CouchDB
//     upstream forwards documents unchanged, another salt or a bucket is
//     re-encrypted at the boundary. The milestone is never encrypted and
//     crosses unchanged.

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

// milestoneBucket is what reconciliation needs of a bucket upstream;
// *minio.Bucket implements it (in-memory test buckets may not, and are
// then not reconciled).
type milestoneBucket interface {
	ReadMilestone(ctx context.Context) (*negotiate.Milestone, error)
	UpdateMilestone(ctx context.Context, me string, now time.Time, fn func(m *negotiate.Milestone, found bool) (bool, error)) (*negotiate.Milestone, error)
}

// relayMilestone reads the relay database's milestone (nil when it has
// none).
func (b *bridge) relayMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	raw, err := b.v.GetLocal(ctx, milestoneLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if isDeletedLocal(raw) {
		return nil, nil
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		return nil, fmt.Errorf("the relay database's milestone: %w", err)
	}
	return m, nil
}

// writeRelayMilestone stores m as the relay database's milestone, in the
// form couchapi serves _local documents (its _rev "0-N" one above the
// stored one, see writeRelayParams).
func (b *bridge) writeRelayMilestone(ctx context.Context, m *negotiate.Milestone) error {
	n := int64(0)
	if raw, err := b.v.GetLocal(ctx, milestoneLocalID); err == nil {
		var cur struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(raw, &cur) == nil {
			if rest, ok := strings.CutPrefix(cur.Rev, "0-"); ok {
				n, _ = strconv.ParseInt(rest, 10, 64)
			}
		}
	}
	c := m.Clone()
	c.ID, c.Rev = negotiate.MilestoneDocID, "0-"+strconv.FormatInt(n+1, 10)
	if c.Type == "" {
		c.Type = negotiate.TypeMilestoneInfo
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return b.v.PutLocal(ctx, milestoneLocalID, doc)
}

// couchMilestone reads a CouchDB upstream's milestone (nil when absent).
func couchMilestone(ctx context.Context, db *couchdb.DB) (*negotiate.Milestone, error) {
	raw, err := db.GetLocal(ctx, milestoneLocalID)
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

// readUpstreamMilestone reads an upstream's milestone; ok is false for a
// bucket that cannot hold one (an in-memory test bucket).
func (u *upstream) readUpstreamMilestone(ctx context.Context) (m *negotiate.Milestone, ok bool, err error) {
	if u.couch != nil {
		m, err = couchMilestone(ctx, u.couch)
		return m, true, err
	}
	mb, ok := u.bucket.(milestoneBucket)
	if !ok {
		return nil, false, nil
	}
	m, err = mb.ReadMilestone(ctx)
	return m, true, err
}

// adoptFirstSettings gives a relay database without a PREFERRED set the
// vault settings of the first upstream (in configuration order) whose
// milestone has one. Failures are logged; each upstream's handshake
// reconciles again.
func (b *bridge) adoptFirstSettings(ctx context.Context) {
	rm, err := b.relayMilestone(ctx)
	if err != nil || negotiate.VaultOf(rm).HasPreferred {
		return
	}
	for _, u := range b.ups {
		cctx, cancel := context.WithTimeout(ctx, saltStepTimeout)
		m, ok, err := u.readUpstreamMilestone(cctx)
		cancel()
		if err != nil || !ok || !negotiate.VaultOf(m).HasPreferred {
			continue
		}
		cctx, cancel = context.WithTimeout(ctx, saltStepTimeout)
		err = u.reconcileSettings(cctx)
		cancel()
		if err != nil {
			b.log.Warn("adopting an upstream's vault settings failed", "upstream", u.spec.name, "err", err)
		} else {
			b.log.Info("the database had no vault settings: adopted the upstream's milestone", "upstream", u.spec.name)
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
	um, ok, err := u.readUpstreamMilestone(ctx)
	if err != nil || !ok {
		return err
	}
	vault, remote := negotiate.VaultOf(rm), negotiate.VaultOf(um)
	res := negotiate.Reconcile(vault, remote, u.settingsBase)
	if len(res.Diffs) > 0 {
		return &settingsDifferError{db: b.db, where: "upstream " + strconv.Quote(u.spec.name) + " (" + u.spec.location() + ")", diffs: res.Diffs}
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
		return u.couch.PutLocal(ctx, milestoneLocalID, withoutMeta(raw))
	}
	mb := u.bucket.(milestoneBucket)
	_, err := mb.UpdateMilestone(ctx, "", time.Now(), func(m *negotiate.Milestone, found bool) (bool, error) {
		cur := negotiate.VaultOf(m)
		if !found {
			cur = negotiate.VaultSettings{}
		}
		if cur.HasPreferred && v.HasPreferred {
			if d := negotiate.TweakMismatch(v.Preferred, cur.Preferred.WithDefaults()); len(d) > 0 {
				return false, &settingsDifferError{db: u.b.db, where: "upstream " + strconv.Quote(u.spec.name), diffs: d}
			}
		}
		return m.SetVault(v, ranges) || !found, nil
	})
	return err
}

// settingsChanged is called after a client wrote the relay database's
// milestone: the connected upstreams are reconciled soon after (by
// reconcileLoop).
func (b *bridge) settingsChanged() {
	select {
	case b.settingsWake <- struct{}{}:
	default:
	}
}

// reconcileLoop reconciles the connected upstreams whenever the relay
// database's milestone was written, until ctx ends. An upstream that now
// disagrees has its session ended, so that its next handshake reports
// the difference. When the milestone changed the vault codec's settings
// (vaultStore.rekey), every session ends: they encode and re-encrypt
// with the codec they started with.
func (b *bridge) reconcileLoop(ctx context.Context) {
	codecSettings := func() livesync.Settings {
		if c, _ := b.v.currentCodec(); c != nil {
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
			if u.source() == nil {
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

// endSession ends the upstream's current session; its runner connects
// again at once.
func (u *upstream) endSession() {
	u.sessMu.Lock()
	if u.sessCancel != nil {
		u.sessCancel()
	}
	u.sessMu.Unlock()
}
