package decorate

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
)

// ErrNoSource means none of a Multi's sources could fetch by id when
// asked (none connected yet): a transport failure, retried later.
var ErrNoSource = errors.New("no source can fetch chunks by id yet")

// Multi is one chunk source over several, asked in order: each is asked
// only for what the ones before it answered missing, and sources whose
// CanFetchDirect is false at the time are skipped. A source that fails
// is passed over (the next gets its ids); the request fails only when
// nothing was found and a source failed, with the first failure. key is
// the throttle key (empty: the first source's).
func Multi(key string, sources ...engine.ChunkSource) engine.ChunkSource {
	if key == "" && len(sources) > 0 {
		key = sources[0].ThrottleKey()
	}
	return &multi{key: key, sources: sources}
}

type multi struct {
	key     string
	sources []engine.ChunkSource
}

func (m *multi) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	var res engine.FetchResult
	remaining := ids
	var firstErr error
	asked := false
	for _, src := range m.sources {
		if !src.CanFetchDirect() {
			continue
		}
		asked = true
		r, err := src.FetchChunks(ctx, remaining)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		res.Found = append(res.Found, r.Found...)
		remaining = r.Missing
		if len(remaining) == 0 {
			break
		}
	}
	switch {
	case !asked:
		return engine.FetchResult{}, &engine.Error{Op: "fetch chunks", Stage: engine.StageTransport, Err: ErrNoSource}
	case firstErr != nil && len(res.Found) == 0:
		return engine.FetchResult{}, firstErr
	}
	res.Missing = remaining
	return res, nil
}

// CanFetchDirect is true while one of the sources can fetch by id.
func (m *multi) CanFetchDirect() bool {
	for _, src := range m.sources {
		if src.CanFetchDirect() {
			return true
		}
	}
	return false
}

func (m *multi) ThrottleKey() string { return m.key }
