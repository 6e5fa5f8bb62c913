//go:build !(linux || darwin || freebsd)

package main

// diskSpace is not reported on this platform.
func diskSpace(string) (avail, size uint64, ok bool) { return 0, 0, false }
