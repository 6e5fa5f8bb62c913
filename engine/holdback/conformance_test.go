package holdback

import (
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
)

// runConformance runs the store conformance suite against the decorator
// with its full hold-back configuration: the suite's documents either
// are not file metadata or name no chunk, so none is held, and the
// decorator must keep the whole Store contract for them.
func runConformance(t *testing.T, open func(t *testing.T, opts store.Options) store.Store) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		s, err := New(Config{}, Deps{Inner: open(t, opts)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if st := s.Stats(); st.Holds != 0 {
				t.Errorf("the suite held %d revisions", st.Holds)
			}
		})
		return s
	})
}

func TestConformanceMemory(t *testing.T) {
	runConformance(t, func(t *testing.T, opts store.Options) store.Store {
		opts.Name = "test"
		st, err := store.NewMemory(opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
