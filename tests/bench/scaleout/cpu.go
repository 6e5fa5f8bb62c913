//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sha256Hex is the hex sha256 of b, as livesync-load.mjs sums a client's
// "id rev" lines.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sampler reads the CPU time of the processes of a setup.
type sampler struct {
	srv, self int
	relays    []int
	clients   []int
}

// cpuSample is the CPU time (clock ticks, user + system) of each process
// and the machine's busy and total ticks (every core) at one moment.
type cpuSample struct {
	at          time.Time
	relays      []uint64
	server      uint64
	clients     map[int]uint64
	self        uint64
	busy, total uint64
}

func (s *sampler) sample() cpuSample {
	c := cpuSample{at: time.Now(), server: procTicks(s.srv), self: procTicks(s.self), clients: map[int]uint64{}}
	for _, p := range s.relays {
		c.relays = append(c.relays, procTicks(p))
	}
	for _, p := range s.clients {
		c.clients[p] = procTicks(p)
	}
	c.busy, c.total = machineTicks()
	return c
}

// procTicks returns utime + stime of a process (0 if it is gone).
func procTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) start
	// with the state, field 3; utime and stime are fields 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st
}

// machineTicks returns the busy and total ticks of every core (the "cpu"
// line of /proc/stat; idle and iowait are not busy).
func machineTicks() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total
}

// clockTicks is the kernel's clock ticks per second (getconf CLK_TCK).
var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if v, err2 := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && err2 == nil && v > 0 {
		return v
	}
	return 100
}()

// cpuUse is where the CPU went over a window, in cores (CPU seconds per
// second of the window).
type cpuUse struct {
	WallS   float64   `json:"wallSec"`
	Relays  []float64 `json:"relays"` // each relay process
	Server  float64   `json:"server"`
	Clients float64   `json:"clients"` // the node processes together
	Writer  float64   `json:"writer"`  // this process
	Machine float64   `json:"machine"` // every process on the machine
	Other   float64   `json:"other"`   // processes not of the benchmark (others' work on a shared machine)
	Cores   int       `json:"cores"`
}

func use(a, b cpuSample, relays int) cpuUse {
	wall := b.at.Sub(a.at).Seconds()
	cores := func(d uint64) float64 { return float64(d) / clockTicks / wall }
	u := cpuUse{WallS: wall, Server: cores(b.server - a.server), Writer: cores(b.self - a.self), Cores: runtime.NumCPU()}
	for i := range relays {
		u.Relays = append(u.Relays, cores(b.relays[i]-a.relays[i]))
	}
	var clients uint64
	for pid, t := range b.clients {
		clients += t - a.clients[pid] // a process started after a: from 0
	}
	u.Clients = cores(clients)
	if b.total > a.total {
		u.Machine = float64(b.busy-a.busy) / float64(b.total-a.total) * float64(u.Cores)
	}
	u.Other = max(0, u.Machine-u.relaysTotal()-u.Server-u.Clients-u.Writer)
	return u
}

func (u cpuUse) relaysTotal() float64 {
	var s float64
	for _, r := range u.Relays {
		s += r
	}
	return s
}

// bottleneck names what limits a setup: the test server when its one
// event loop is nearly always busy, the machine when every core is,
// then the biggest consumer.
func (u cpuUse) bottleneck() string {
	type part struct {
		name  string
		cores float64
	}
	parts := []part{{"relays", u.relaysTotal()}, {"test server", u.Server}, {"node clients", u.Clients}, {"writer", u.Writer},
		{"other processes", u.Other}}
	top := parts[0]
	for _, p := range parts[1:] {
		if p.cores > top.cores {
			top = p
		}
	}
	switch {
	case u.Server >= 0.85:
		return fmt.Sprintf("the test server (single-threaded, %.2f of its one core)", u.Server)
	case u.Machine >= 0.9*float64(u.Cores):
		return fmt.Sprintf("machine CPU (%.2f of %d cores busy; most: %s, %.2f cores)", u.Machine, u.Cores, top.name, top.cores)
	default:
		return fmt.Sprintf("none saturated (%.2f of %d cores busy; most: %s, %.2f cores)", u.Machine, u.Cores, top.name, top.cores)
	}
}

// report writes the table of the setups.
func report(w io.Writer, o options, rs []*result) {
	fmt.Fprintf(w, "\n%d PouchDB 9 clients (LiveSync's settings, %d node processes), %d E2EE notes of ~1 KiB, a live note every %v written metadata first through the first relay and its chunks through the last; couchdb rows: relays with a couchdb store on one CouchDB-protocol test server. CPU in cores over the window from the clients' start to the last catch-up.\n\n",
		o.clients, o.procs, o.notes, tick)
	fmt.Fprintln(w, "| store | relays | docs/s (catch-up) | catch-up s | requests | p50 ms | p99 ms | max ms | relays CPU (cores, each) | test server CPU | node clients CPU | writer CPU | other processes | machine busy | bottleneck |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		var each []string
		for _, c := range r.CPU.Relays {
			each = append(each, fmt.Sprintf("%.2f", c))
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %d | %.1f | %.1f | %.1f | %.2f (%s) | %.2f | %.2f | %.2f | %.2f | %.2f / %d | %s |\n",
			r.Setup, r.Relays, r.DocsPerS, r.CatchUpS, r.Requests, r.P50Ms, r.P99Ms, r.MaxMs, r.CPU.relaysTotal(), strings.Join(each, ", "),
			r.CPU.Server, r.CPU.Clients, r.CPU.Writer, r.CPU.Other, r.CPU.Machine, r.CPU.Cores, r.CPU.bottleneck())
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "%s, %d relay(s): %d documents, %d live notes held and released, %d violations, %d relay(s) holding the lease at the end\n",
			r.Setup, r.Relays, r.Docs, r.LiveNotes, r.Violations, r.Leaders)
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(r.ByKind)) {
			if b := r.ByKind[k]; b.N >= 20 {
				kinds = append(kinds, fmt.Sprintf("%s %d: p50 %.0f, p99 %.0f", k, b.N, b.P50Ms, b.P99Ms))
			}
		}
		fmt.Fprintf(w, "  client-side latency by kind (ms): %s\n", strings.Join(kinds, "; "))
		fmt.Fprintf(w, "  relay-side time by route (ms, the relays' /metrics; _changes counts longpolls): %s\n", formatRouteTimes(r.RelayByRoute))
		for i, u := range r.Syncs {
			fmt.Fprintf(w, "  relay %d syncs while the clients ran: %s\n", i+1, u)
		}
		if r.Setup == "couchdb" {
			fmt.Fprintf(w, "  the relays made %d requests to the server for the clients' %d (%.2f each, longpolls included): %s\n",
				r.ServerRequests, r.Requests, float64(r.ServerRequests)/float64(max(1, r.Requests)), r.ServerKinds)
		}
	}
}
