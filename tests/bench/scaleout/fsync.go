//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// With -strace, strace -c counts the relays' fdatasync and fsync calls
// and the wall time spent in them (strace -w: waiting for the disk
// included) over the same window as the latencies: from the clients' start
// until they finished. A relay on bbolt makes one commit, with its
// syncs, per write request (_bulk_docs, a _local checkpoint), and its
// writes take turns: the time in fdatasync is time every waiting write
// waits too.

// syncUse is what strace counted for one relay.
type syncUse struct {
	Fdatasync int     `json:"fdatasync"`
	Fsync     int     `json:"fsync"`
	Seconds   float64 `json:"seconds"` // in both calls
}

type syncTracer struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startSyncTracer(pid int) (*syncTracer, error) {
	s := &syncTracer{}
	s.cmd = exec.Command("strace", "-c", "-w", "-f", "-e", "trace=fdatasync,fsync", "-p", strconv.Itoa(pid))
	s.cmd.Stderr = &s.out
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond) // strace attaches to every thread
	return s, nil
}

// strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
var syncRow = regexp.MustCompile(`(?m)^\s*[\d.]+\s+([\d.]+)\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fdatasync|fsync)\s*$`)

func (s *syncTracer) stop() syncUse {
	s.cmd.Process.Signal(syscall.SIGINT)
	s.cmd.Wait()
	var u syncUse
	for _, m := range syncRow.FindAllStringSubmatch(s.out.String(), -1) {
		secs, _ := strconv.ParseFloat(m[1], 64)
		n, _ := strconv.Atoi(m[2])
		u.Seconds += secs
		if m[3] == "fsync" {
			u.Fsync += n
		} else {
			u.Fdatasync += n
		}
	}
	return u
}

func (u syncUse) String() string {
	return fmt.Sprintf("%d fdatasync + %d fsync, %.1f s in them", u.Fdatasync, u.Fsync, u.Seconds)
}
