package vault

import (
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// Link is a remote attached to the vault: the handshake passed, the
// codec holds the remote's salt.
type Link struct {
	v      *Vault
	remote Remote
	codec  *livesync.Codec
	// chunks is the remote's chunk source (nil: it cannot fetch by id).
	chunks engine.ChunkSource
	// readOnly: attached without writing to the remote.
	readOnly bool

	journal *journalsync.Journal // a journal remote's journal
	cipher  journal.Cipher       // its pack cipher (nil: plain packs)

	jmu     sync.Mutex
	checked bool                             // the passphrase opened a journal pack
	run     *run                             // the sync in progress
	lastKey map[journalsync.Direction]string // the newest pack of the run, by direction
}

// Remote is the attached remote.
func (l *Link) Remote() Remote { return l.remote }

// ID is the remote's ID.
func (l *Link) ID() string { return l.remote.ID() }

// Codec is the vault's codec with the remote's salt.
func (l *Link) Codec() *livesync.Codec { return l.codec }

// Chunks is the remote's chunk source for reads by id, nil when it
// cannot fetch by id.
func (l *Link) Chunks() engine.ChunkSource { return l.chunks }

// Links returns the attached remotes, in attach order.
func (v *Vault) Links() []*Link {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]*Link(nil), v.links...)
}

// Detach forgets the attached remote l: reads and hunts no longer ask
// it. It does not close the remote.
func (v *Vault) Detach(l *Link) {
	v.mu.Lock()
	for i, x := range v.links {
		if x == l {
			v.links = append(v.links[:i:i], v.links[i+1:]...)
			break
		}
	}
	v.mu.Unlock()
	v.updateSource()
}

// addLink registers l for reads and hunts (replacing a link to the same
// remote ID).
func (v *Vault) addLink(l *Link) {
	v.mu.Lock()
	replaced := false
	for i, x := range v.links {
		if x.ID() == l.ID() {
			v.links[i], replaced = l, true
		}
	}
	if !replaced {
		v.links = append(v.links, l)
	}
	v.mu.Unlock()
	v.updateSource()
}

// fetchSources returns the chunk sources of the attached remotes that
// can fetch by id.
func (v *Vault) fetchSources() []engine.ChunkSource {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []engine.ChunkSource
	for _, l := range v.links {
		if l.chunks != nil && l.chunks.CanFetchDirect() {
			out = append(out, l.chunks)
		}
	}
	return out
}

// noFetchRemotes names the attached remotes that cannot fetch by id.
func (v *Vault) noFetchRemotes() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for _, l := range v.links {
		if l.chunks == nil || !l.chunks.CanFetchDirect() {
			out = append(out, l.ID())
		}
	}
	return out
}

// updateSource gives the fetcher the attached remotes' sources.
func (v *Vault) updateSource() {
	srcs := v.fetchSources()
	switch len(srcs) {
	case 0:
		v.fetcher.SetSource(nil)
	case 1:
		v.fetcher.SetSource(srcs[0])
	default:
		v.fetcher.SetSource(decorate.Multi("", srcs...))
	}
}
