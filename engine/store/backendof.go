package store

// BackendOf returns the Backend that a Store built by Open runs on, or
// nil for a Store of another kind (or one wrapped by another type). It
// lets a backend's own package offer what the Store interface does not,
// such as a consistent copy of its file (boltstore.Snapshot).
func BackendOf(s Store) Backend {
	if k, ok := s.(*kvStore); ok {
		return k.b
	}
	return nil
}
