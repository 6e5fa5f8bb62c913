//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes the data folder's lock without waiting. The lock
// ends with the returned release function or with the process.
func lockDataDir(dir string) (release func(), err error) {
	p := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data folder %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data folder %s: %w (another livesync-relay with the same data folder?); stop it, or give this one another folder with --data-dir or \"data_dir\" in the configuration file", dir, errFolderInUse)
		}
		return nil, fmt.Errorf("data folder %s: locking %s: %w", dir, p, err)
	}
	return func() { f.Close() }, nil
}
