//go:build linux || darwin || freebsd

package main

import "syscall"

// diskSpace returns the space an unprivileged writer may still use on
// dir's filesystem and the filesystem's size, in bytes.
func diskSpace(dir string) (avail, size uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	bs := uint64(st.Bsize)
	return uint64(st.Bavail) * bs, uint64(st.Blocks) * bs, true
}
