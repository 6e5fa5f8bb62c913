package negotiate

import "slices"

// VaultSettings is the vault-wide part of a milestone: what every remote of one vault must agree on when something
// (a relay) bridges several remotes. The PREFERRED tweak set, the lock
// flags and accepted_nodes belong to the vault; node_info,
// node_chunk_info and tweak_values[node] are each remote's record of the
// nodes that connected to it, and stay per remote.
//
// Present is false when the remote has no milestone at all.
type VaultSettings struct {
	Present       bool
	Preferred     TweakValues
	HasPreferred  bool // a PREFERRED set that is not null
	Locked        bool
	Cleaned       bool
	AcceptedNodes []string
}

// VaultOf returns m's vault-wide part; nil gives the zero VaultSettings
// (not Present).
func VaultOf(m *Milestone) VaultSettings {
	if m == nil {
		return VaultSettings{}
	}
	v := VaultSettings{Present: true, Locked: m.Locked, Cleaned: m.Cleaned,
		AcceptedNodes: slices.Clone(m.AcceptedNodes)}
	if p, ok := m.TweakValues[PreferredNode]; ok && !p.null {
		v.Preferred, v.HasPreferred = p.Clone(), true
	}
	return v
}

// Equal reports whether v and o hold the same vault-wide settings
// (PREFERRED compared as Milestone.Register does, every key; accepted
// nodes in order).
func (v VaultSettings) Equal(o VaultSettings) bool {
	return v.Present == o.Present && v.sameLock(o) && v.HasPreferred == o.HasPreferred &&
		(!v.HasPreferred || v.Preferred.Equal(o.Preferred))
}

func (v VaultSettings) sameLock(o VaultSettings) bool {
	return v.Locked == o.Locked && v.Cleaned == o.Cleaned && slices.Equal(v.AcceptedNodes, o.AcceptedNodes)
}

// Reconciled is the outcome of Reconcile: the settings the vault's own
// milestone and the remote's must hold. A side whose settings differ from
// what it holds is written; when Diffs is not empty nothing is written.
type Reconciled struct {
	Vault  VaultSettings
	Remote VaultSettings
	// Diffs lists the must-match keys on which the remote's PREFERRED
	// disagrees with the vault's (Preferred: the vault's value, Current:
	// the remote's). Neither side may then be overwritten: the plugin
	// asks its user which side wins (ModuleResolveMismatchedTweaks), and
	// a bridge cannot ask.
	Diffs []TweakDiff
}

// Reconcile brings one remote's vault-wide settings into agreement with
// the vault's, by the plugin's rules:
//
//   - PREFERRED: a side without one takes the other's (the plugin creates
//     it only when absent, ensureRemoteIsCompatible step 3). When both
//     have one and a must-match key differs (TweakMismatch, defaults
//     applied to both), Reconcile changes nothing and returns the Diffs.
//     Recommended keys may differ: each side keeps its own set.
//   - A remote with no milestone takes the vault's settings whole; a
//     vault with none takes the remote's.
//   - The lock (locked, cleaned, accepted_nodes, which change together in
//     markRemoteLocked and markRemoteResolved) is merged three ways
//     against base, the remote's settings after its previous
//     reconciliation (nil when unknown, as after a restart): the side
//     that changed since base wins, so a lock, an unlock and an accepted
//     device made on either side reach the other. When both changed, or
//     base is unknown: a locked side wins over an unlocked one (a lock
//     guards a rebuild; an unlock of unknown age is not trusted); when
//     both are locked or both unlocked, cleaned is true if either is and
//     accepted_nodes is the union, the vault's order first.
//
// Reconcile is pure: it reads its arguments and returns new values.
func Reconcile(vault, remote VaultSettings, base *VaultSettings) Reconciled {
	switch {
	case !vault.Present && !remote.Present:
		return Reconciled{Vault: vault, Remote: remote}
	case !remote.Present:
		return Reconciled{Vault: vault, Remote: vault.clone()}
	case !vault.Present:
		return Reconciled{Vault: remote.clone(), Remote: remote}
	}
	if vault.HasPreferred && remote.HasPreferred {
		if d := TweakMismatch(vault.Preferred, remote.Preferred.WithDefaults()); len(d) > 0 {
			return Reconciled{Vault: vault, Remote: remote, Diffs: d}
		}
	}
	nv, nr := vault.clone(), remote.clone()
	switch {
	case vault.HasPreferred && !remote.HasPreferred:
		nr.Preferred, nr.HasPreferred = vault.Preferred.Clone(), true
	case remote.HasPreferred && !vault.HasPreferred:
		nv.Preferred, nv.HasPreferred = remote.Preferred.Clone(), true
	}
	if !vault.sameLock(remote) {
		var lock VaultSettings
		switch {
		case base != nil && remote.sameLock(*base):
			lock = vault
		case base != nil && vault.sameLock(*base):
			lock = remote
		case vault.Locked != remote.Locked:
			lock = vault
			if remote.Locked {
				lock = remote
			}
		default:
			lock = VaultSettings{Locked: vault.Locked, Cleaned: vault.Cleaned || remote.Cleaned,
				AcceptedNodes: union(vault.AcceptedNodes, remote.AcceptedNodes)}
		}
		nv.setLock(lock)
		nr.setLock(lock)
	}
	return Reconciled{Vault: nv, Remote: nr}
}

func (v VaultSettings) clone() VaultSettings {
	c := v
	c.Preferred = v.Preferred.Clone()
	c.AcceptedNodes = slices.Clone(v.AcceptedNodes)
	return c
}

func (v *VaultSettings) setLock(l VaultSettings) {
	v.Locked, v.Cleaned, v.AcceptedNodes = l.Locked, l.Cleaned, slices.Clone(l.AcceptedNodes)
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// SetVault gives m the vault-wide settings v (PREFERRED only when v has
// one) and reports whether m changed. Per-node entries stay m's, except
// that an accepted node without a node_chunk_info entry in m takes its
// entry from ranges (the milestone v came from) when it has one: Check
// narrows the chunk range of every accepted node, and a missing entry
// would make every device incompatible.
func (m *Milestone) SetVault(v VaultSettings, ranges map[string]ChunkRange) bool {
	before := VaultOf(m)
	changed := !before.sameLock(v) ||
		v.HasPreferred && (!before.HasPreferred || !before.Preferred.Equal(v.Preferred))
	m.Locked, m.Cleaned = v.Locked, v.Cleaned
	if v.Cleaned {
		m.hasCleaned = true
	}
	m.AcceptedNodes = slices.Clone(v.AcceptedNodes)
	if v.HasPreferred {
		if m.TweakValues == nil {
			m.TweakValues = map[string]TweakValues{}
		}
		m.TweakValues[PreferredNode] = v.Preferred.Clone()
	}
	for _, n := range v.AcceptedNodes {
		r, ok := ranges[n]
		if _, have := m.NodeChunkInfo[n]; have || !ok {
			continue
		}
		if m.NodeChunkInfo == nil {
			m.NodeChunkInfo = map[string]ChunkRange{}
		}
		m.NodeChunkInfo[n] = r
		changed = true
	}
	return changed
}
