package main

import (
	"context"
	"io"
	"sort"
	"strings"
)

// subcommand is a verb given before the flags (`livesync-relay backup
// --out FILE`). Each lives in its own file and registers itself from an
// init function, so run only has to look the first argument up.
type subcommand struct {
	// summary is the one line shown in the main usage text.
	summary string
	// run parses args (what follows the verb) and does the work; its
	// result is the process's exit code.
	run func(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int
}

var subcommands = map[string]subcommand{}

// register adds a subcommand; two with one name is a programming error.
func register(name string, sc subcommand) {
	if _, dup := subcommands[name]; dup {
		panic("livesync-relay: subcommand " + name + " registered twice")
	}
	subcommands[name] = sc
}

// subcommandUsage lists the registered subcommands for the usage text.
func subcommandUsage() string {
	if len(subcommands) == 0 {
		return ""
	}
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("\nsubcommands (livesync-relay SUBCOMMAND -h for its flags):\n")
	for _, n := range names {
		b.WriteString("  " + n + strings.Repeat(" ", max(1, 13-len(n))) + subcommands[n].summary + "\n")
	}
	return b.String()
}
