package idb

import "errors"

// ErrBusy means the database is open elsewhere: in another tab or window,
// or by another handle in this one. Close that handle first.
var ErrBusy = errors.New("idb: the replica's IndexedDB database is open in another tab, window or vault handle")
