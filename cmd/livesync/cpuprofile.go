package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfile starts a CPU profile of a pull, push or sync into the file
// $LIVESYNC_CPUPROFILE names (for benchmarks: go tool pprof -top). The
// returned function stops it; without the variable it does nothing.
func cpuProfile(env *cliEnv) (stop func(), err error) {
	path := env.getenv("LIVESYNC_CPUPROFILE")
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("LIVESYNC_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("LIVESYNC_CPUPROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
