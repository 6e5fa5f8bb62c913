package negotiate

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func tweaksWith(t *testing.T, kv ...any) TweakValues {
	t.Helper()
	tv := NewVaultTweaks()
	for i := 0; i < len(kv); i += 2 {
		if err := tv.Set(kv[i].(string), kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return tv
}

func settings(pref *TweakValues, locked, cleaned bool, accepted ...string) VaultSettings {
	v := VaultSettings{Present: true, Locked: locked, Cleaned: cleaned, AcceptedNodes: accepted}
	if pref != nil {
		v.Preferred, v.HasPreferred = pref.Clone(), true
	}
	return v
}

// The milestone's vault-wide parts (PREFERRED tweak values, locked,
// cleaned, accepted_nodes) are reconciled across every remote of a
// bridged database, by the plugin's rules.
func TestReconcile(t *testing.T) {
	e2ee := tweaksWith(t, "encrypt", true, "usePathObfuscation", true)
	plain := tweaksWith(t, "encrypt", false, "usePathObfuscation", false)
	otherBatch := tweaksWith(t, "encrypt", true, "usePathObfuscation", true, "batch_size", 7)
	unlocked := settings(&e2ee, false, false, "a")
	locked := settings(&e2ee, true, false, "r")

	tests := []struct {
		name          string
		vault, remote VaultSettings
		base          *VaultSettings
		wantVault     VaultSettings
		wantRemote    VaultSettings
		wantDiffs     []string
	}{
		{name: "nothing anywhere", wantVault: VaultSettings{}, wantRemote: VaultSettings{}},
		{name: "a new vault adopts the remote's", remote: unlocked, wantVault: unlocked, wantRemote: unlocked},
		{name: "a remote without a milestone takes the vault's", vault: locked, wantVault: locked, wantRemote: locked},
		{name: "a remote without PREFERRED takes the vault's", vault: unlocked, remote: settings(nil, false, false, "a"),
			wantVault: unlocked, wantRemote: unlocked},
		{name: "a vault without PREFERRED takes the remote's", vault: settings(nil, false, false, "a"), remote: unlocked,
			wantVault: unlocked, wantRemote: unlocked},
		{name: "must-match keys differ: nothing changes", vault: unlocked, remote: settings(&plain, true, false, "x"),
			wantVault: unlocked, wantRemote: settings(&plain, true, false, "x"),
			wantDiffs: []string{"encrypt", "usePathObfuscation"}},
		{name: "recommended keys may differ", vault: unlocked, remote: settings(&otherBatch, false, false, "a"),
			wantVault: unlocked, wantRemote: settings(&otherBatch, false, false, "a")},
		{name: "a lock made on the remote reaches the vault", vault: unlocked, remote: settings(&e2ee, true, true, "r"),
			base: &unlocked, wantVault: settings(&e2ee, true, true, "r"), wantRemote: settings(&e2ee, true, true, "r")},
		{name: "an unlock made on the vault reaches the remote", vault: settings(&e2ee, false, false, "v"), remote: locked,
			base: &locked, wantVault: settings(&e2ee, false, false, "v"), wantRemote: settings(&e2ee, false, false, "v")},
		{name: "an unlock of unknown age loses to a lock", vault: settings(&e2ee, false, false, "v"), remote: locked,
			wantVault: locked, wantRemote: locked},
		{name: "both locked: accepted nodes are the union", vault: settings(&e2ee, true, false, "r", "a"),
			remote:    settings(&e2ee, true, true, "r", "b"),
			wantVault: settings(&e2ee, true, true, "r", "a", "b"), wantRemote: settings(&e2ee, true, true, "r", "a", "b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Reconcile(tt.vault, tt.remote, tt.base)
			var diffs []string
			for _, d := range got.Diffs {
				diffs = append(diffs, d.Key)
			}
			if !slices.Equal(diffs, tt.wantDiffs) {
				t.Fatalf("diffs %v, want %v", diffs, tt.wantDiffs)
			}
			if !got.Vault.Equal(tt.wantVault) {
				t.Errorf("vault %+v, want %+v", got.Vault, tt.wantVault)
			}
			if !got.Remote.Equal(tt.wantRemote) {
				t.Errorf("remote %+v, want %+v", got.Remote, tt.wantRemote)
			}
			// Reconciling the outcome again changes nothing.
			again := Reconcile(got.Vault, got.Remote, &got.Remote)
			if len(got.Diffs) == 0 && (!again.Vault.Equal(got.Vault) || !again.Remote.Equal(got.Remote)) {
				t.Errorf("not a fixed point: %+v", again)
			}
		})
	}
}

// Per-node entries (node_info, node_chunk_info, tweak_values[node]) stay
// per remote, except the chunk range an accepted node needs.
func TestMilestoneSetVault(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	src := NewMilestone("r", now)
	src.Register("r", CouchDBChunkRange, DeviceInfo{DeviceName: "relay-client"}, NewVaultTweaks(), now)
	src.Lock("r", CouchDBChunkRange, true)

	dst := NewMilestone("b", now)
	dst.Register("b", CouchDBChunkRange, DeviceInfo{DeviceName: "b-client"}, NewVaultTweaks(), now)
	delete(dst.TweakValues, PreferredNode)
	if !dst.SetVault(VaultOf(src), src.NodeChunkInfo) {
		t.Fatal("SetVault reported no change")
	}
	if !VaultOf(dst).Equal(VaultOf(src)) {
		t.Fatalf("vault settings %+v, want %+v", VaultOf(dst), VaultOf(src))
	}
	if _, ok := dst.NodeInfo["r"]; ok {
		t.Error("node_info crossed")
	}
	if _, ok := dst.TweakValues["r"]; ok {
		t.Error("tweak_values[r] crossed")
	}
	if _, ok := dst.NodeInfo["b"]; !ok {
		t.Error("the remote's own node_info was dropped")
	}
	if _, ok := dst.NodeChunkInfo["r"]; !ok {
		t.Error("the accepted node r has no node_chunk_info: Check would find every device incompatible")
	}
	raw, _ := json.Marshal(dst)
	back, err := ParseMilestone(raw)
	if err != nil || !VaultOf(back).Equal(VaultOf(src)) {
		t.Fatalf("round trip: %v %s", err, raw)
	}
	if dst.SetVault(VaultOf(src), src.NodeChunkInfo) {
		t.Error("SetVault again reported a change")
	}
}
