package enginetest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The suites run here against the in-memory fakes and the engine's
// decorators around them; the adapters' own conformance tests run them
// against the real servers.

// The two declarations of the Objects port have the same method set.
var (
	_ enginetest.Objects  = journalsync.Objects(nil)
	_ journalsync.Objects = enginetest.Objects(nil)
)

func memoryEndpoint(t *testing.T) (engine.Endpoint, func()) {
	st, err := store.NewMemory(store.Options{Name: "suite"})
	if err != nil {
		t.Fatal(err)
	}
	return st, func() { st.Close() }
}

func TestEndpointSuiteMemoryStore(t *testing.T) {
	enginetest.EndpointSuite(t, memoryEndpoint)
}

// noWait retries at once, so the decorator suites take no time.
var noWait = decorate.Policy{Delay: func(int) time.Duration { return 0 }}

func TestEndpointSuiteDecorated(t *testing.T) {
	t.Run("Retry", func(t *testing.T) {
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			ep, cleanup := memoryEndpoint(t)
			return decorate.RetryEndpoint(ep, noWait), cleanup
		})
	})
	t.Run("Metered", func(t *testing.T) {
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			ep, cleanup := memoryEndpoint(t)
			return decorate.MeteredEndpoint(ep, &decorate.Meter{Limit: 4}), cleanup
		})
	})
}

func TestObjectsSuiteMemObjects(t *testing.T) {
	enginetest.ObjectsSuite(t, func(t *testing.T) (enginetest.Objects, func(string), func()) {
		m := enginetest.NewMemObjects("vault/", "")
		return m, m.Remove, nil
	})
	t.Run("NoPrefix", func(t *testing.T) {
		enginetest.ObjectsSuite(t, func(t *testing.T) (enginetest.Objects, func(string), func()) {
			m := enginetest.NewMemObjects("", "bucket")
			return m, m.Remove, nil
		})
	})
}

func TestObjectsSuiteDecorated(t *testing.T) {
	t.Run("Retry", func(t *testing.T) {
		enginetest.ObjectsSuite(t, func(t *testing.T) (enginetest.Objects, func(string), func()) {
			m := enginetest.NewMemObjects("vault/", "")
			return decorate.RetryObjects(m, noWait), m.Remove, nil
		})
	})
	t.Run("Metered", func(t *testing.T) {
		enginetest.ObjectsSuite(t, func(t *testing.T) (enginetest.Objects, func(string), func()) {
			m := enginetest.NewMemObjects("vault/", "")
			return decorate.MeteredObjects(m, &decorate.Meter{Limit: 4}), m.Remove, nil
		})
	})
}

func mapSource(chunks []engine.Chunk) enginetest.MapSource {
	m := map[engine.ChunkID]string{}
	for _, c := range chunks {
		m[c.ID] = c.Data
	}
	return enginetest.MapSource{Key: "memory", Chunks: m}
}

// down is the error of a source whose server does not answer.
var down = &engine.Error{Op: "fetch chunks", Stage: engine.StageTransport, Err: errors.New("connection refused")}

func TestChunkSourceSuiteMapSource(t *testing.T) {
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) { return mapSource(chunks), nil },
		func(t *testing.T) (engine.ChunkSource, func()) {
			return enginetest.MapSource{Key: "memory", Err: down}, nil
		})
}

// The decorators around chunk sources, as the relay's bridge stacks them.
func TestChunkSourceSuiteDecorated(t *testing.T) {
	broken := func(t *testing.T) (engine.ChunkSource, func()) {
		return enginetest.MapSource{Key: "memory", Err: down}, nil
	}
	t.Run("Multi", func(t *testing.T) {
		// The chunks are split between two sources, after one that is not
		// connected yet.
		enginetest.ChunkSourceSuite(t,
			func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
				half := len(chunks) / 2
				return decorate.Multi("", notConnected{enginetest.MapSource{Key: "peer"}}, mapSource(chunks[:half]), mapSource(chunks[half:])), nil
			},
			func(t *testing.T) (engine.ChunkSource, func()) {
				a, _ := broken(t)
				b, _ := broken(t)
				return decorate.Multi("both-down", a, b), nil
			})
	})
	t.Run("Retry", func(t *testing.T) {
		enginetest.ChunkSourceSuite(t,
			func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
				return decorate.RetrySource(mapSource(chunks), noWait), nil
			},
			func(t *testing.T) (engine.ChunkSource, func()) {
				src, _ := broken(t)
				return decorate.RetrySource(src, noWait), nil
			})
	})
	t.Run("Metered", func(t *testing.T) {
		enginetest.ChunkSourceSuite(t,
			func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
				return decorate.Metered(mapSource(chunks), &decorate.Meter{Limit: 2}), nil
			},
			func(t *testing.T) (engine.ChunkSource, func()) {
				src, _ := broken(t)
				return decorate.Metered(src, &decorate.Meter{}), nil
			})
	})
}

// notConnected is a source that cannot fetch by id (yet).
type notConnected struct{ enginetest.MapSource }

func (notConnected) CanFetchDirect() bool { return false }
