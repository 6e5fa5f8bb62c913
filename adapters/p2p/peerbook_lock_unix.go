//go:build unix

package p2p

import (
	"fmt"
	"os"
	"syscall"
)

// lockBook takes an exclusive lock (flock) on a file beside the peer
// book, so that two processes changing the book one after the other
// never lose each other's change. It waits for the other process, which
// holds it only for one read and one write.
func lockBook(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("p2p: peer book lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("p2p: peer book lock: %w", err)
	}
	return func() { f.Close() }, nil
}
