package vault

import (
	"context"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
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

	jmu     sync.Mutex
	journal *journalsync.Journal // a journal remote's journal, opened once
	checked bool                 // the passphrase opened a journal pack
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
		v.fetcher.SetSource(fanOut(srcs))
	}
}

// fanOut is a chunk source over several: each asked in turn for the ids
// the ones before it answered missing. A failure of one source is
// returned only when no later source found the ids.
type fanOut []engine.ChunkSource

func (f fanOut) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	var out engine.FetchResult
	want := ids
	var firstErr error
	for _, s := range f {
		if len(want) == 0 {
			break
		}
		res, err := s.FetchChunks(ctx, want)
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out.Found = append(out.Found, res.Found...)
		found := make(map[engine.ChunkID]bool, len(res.Found))
		for _, c := range res.Found {
			found[c.ID] = true
		}
		var next []engine.ChunkID
		for _, id := range want {
			if !found[id] {
				next = append(next, id)
			}
		}
		want = next
	}
	if len(want) > 0 && firstErr != nil {
		return out, firstErr
	}
	out.Missing = want
	return out, nil
}

func (f fanOut) CanFetchDirect() bool { return len(f) > 0 }

func (f fanOut) ThrottleKey() string {
	k := ""
	for i, s := range f {
		if i > 0 {
			k += "+"
		}
		k += s.ThrottleKey()
	}
	return k
}
