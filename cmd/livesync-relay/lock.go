package main

import "errors"

// lockFile is the file in the data folder a running relay holds an
// exclusive lock on (flock), so that a second relay on the same folder
// stops at once, before it writes anything.
const lockFile = "relay.lock"

// errFolderInUse means another process holds the data folder's lock.
var errFolderInUse = errors.New("the data folder is in use by another process")
