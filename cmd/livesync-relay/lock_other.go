//go:build !unix

package main

// lockDataDir does nothing where flock is missing: the database files'
// own locks (bbolt's) still keep a second relay out, after
// dbLockTimeout.
func lockDataDir(string) (release func(), err error) { return func() {}, nil }
