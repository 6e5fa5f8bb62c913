package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// The locked remote. The plugin's "Rebuild
// everything" leaves the remote's milestone locked with only the
// rebuilding device in accepted_nodes; every other device is refused
// (NODE_LOCKED) until it fetches everything again, which makes it join
// (markRemoteResolved), or until someone unlocks the remote
// (markRemoteLocked(false)). The CLI follows the plugin's fetch path:
//
//   - an empty replica joins at once, then pulls (admit);
//   - a replica that holds documents is refused (lockedError), because its
//     data predates the rebuild and must not be merged into the new vault;
//     pull --rebuild-local discards them first (discardReplica), or
//     "livesync unlock" clears the lock (runUnlock);
//   - commands that only read never join: the lock guards against merging
//     stale data, not against reading.

// rekeyedMeanwhile is what the CLI says of vault.ErrRekeyedMeanwhile: a
// salt that changed between the read-only and the writing handshake.
const rekeyedMeanwhile = "the remote's salt changed while connecting (another device rebuilt it just now); run the command again"

// lockedError refuses a replica that holds documents on a remote that
// was rebuilt (locked) or cleaned by another device and does not list
// this device as accepted.
type lockedError struct {
	remote   string   // how the user names the remote (for the commands shown)
	flags    string   // the --config and --store of the command, for the commands shown
	cleaned  bool     // cleaned up rather than rebuilt
	accepted []string // the accepted devices, by name
}

func (e *lockedError) Error() string {
	what := "rebuilt"
	if e.cleaned {
		what = "cleaned up"
	}
	by := ""
	if len(e.accepted) > 0 {
		by = " by " + strings.Join(e.accepted, ", ")
	}
	return fmt.Sprintf("the remote is locked: it was %s%s, and this local replica holds documents from before that, which must not be merged into it. "+
		"Either discard them and fetch everything again: livesync pull %s --rebuild-local%s; "+
		"or, if this replica's data should win, unlock the remote (livesync unlock %s%s) and push",
		what, by, e.remote, e.flags, e.remote, e.flags)
}

func (e *lockedError) Unwrap() error {
	if e.cleaned {
		return negotiate.ErrNodeCleaned
	}
	return negotiate.ErrNodeLocked
}

// remoteArg is how commands shown to the user name the remote: its name
// in the configuration, else its URL without credentials.
func remoteArg(spec remoteSpec) string { return shellQuote(spec.commandArg()) }

// commandArg is the remote as a command's argument: the configuration's
// name, else the URL as the user gave it (it holds no password).
func (s remoteSpec) commandArg() string {
	switch {
	case s.name != "":
		return s.name
	case s.arg != "":
		return s.arg
	}
	return s.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./-_", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// replicaArgs are the --config and --store flags of a command line, as
// a suffix for the commands shown to the user ("" when neither is set).
func (f commonFlags) replicaArgs() string {
	out := ""
	if f.config != "" {
		out += " --config " + shellQuote(f.config)
	}
	if f.store != "" {
		out += " --store " + shellQuote(f.store)
	}
	return out
}

// admit is the vault's Admit: an empty replica joins a remote that is
// locked for it (and says so in one line), a replica that holds
// documents is refused with a *lockedError.
func (c *command) admit(spec remoteSpec, l vault.Locked) (join bool, err error) {
	accepted := vault.AcceptedDevices(l.Milestone)
	if !l.Empty {
		return false, &lockedError{remote: remoteArg(spec), flags: c.cf.replicaArgs(), cleaned: l.Cleaned, accepted: accepted}
	}
	by := ""
	if len(accepted) > 0 {
		by = " by " + strings.Join(accepted, ", ")
	}
	fmt.Fprintf(c.stderr, "%s is locked (rebuilt%s); this replica is empty, so it fetches everything and joins the remote's accepted devices\n", spec, safe(by))
	return true, nil
}

// discardReplica empties the replica at path, as the plugin's "fetch"
// resets its local database before fetching a rebuilt remote: every
// document, checkpoint and record of the vault is dropped, and only this
// device's node id is kept, so the device stays one entry in milestones.
// A fresh file is written beside the old one and renamed over it, so an
// interruption leaves one or the other whole. It returns how many
// documents were discarded; a missing file is not an error.
func (e *cliEnv) discardReplica(path string) (int64, error) {
	if !fileExists(path) {
		return 0, nil
	}
	old, err := e.openReplica(path, false)
	if err != nil {
		return 0, err
	}
	node, err := old.nodeIDIfAny(e.ctx)
	if err != nil {
		old.Close()
		return 0, err
	}
	info, err := old.st.Info(e.ctx)
	if err != nil {
		old.Close()
		return 0, err
	}
	if err := old.Close(); err != nil {
		return 0, err
	}
	tmp := path + ".rebuild-local"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, &localError{tmp, err}
	}
	st, err := boltstore.Open(tmp, boltstore.Options{Options: store.Options{Name: "local"}, Timeout: time.Second})
	if err != nil {
		return 0, &localError{tmp, err}
	}
	fresh := &localStore{Store: st, path: tmp}
	if node != "" {
		err = vault.PutNodeID(e.ctx, fresh, node)
	}
	if cerr := fresh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if rerr := os.Rename(tmp, path); rerr != nil {
			err = &localError{path, rerr}
		}
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return info.DocCount, nil
}

func runUnlock(env *cliEnv, args []string) error {
	c := env.newCommand("unlock", "unlock [REMOTE] [--yes] [flags]")
	yes := c.fs.Bool("yes", false, "do not ask for confirmation (for scripts)")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 1 {
		return usageError{"unlock takes at most one remote"}
	}
	spec, err := c.remote(first(c.pos))
	if err != nil {
		return err
	}
	rep, err := c.replica(true)
	if err != nil {
		return err
	}
	defer rep.Close()
	// Reading proves the credentials and the passphrase; nothing is
	// written before the confirmation.
	l, err := c.connect(spec, rep, connectOptions{readOnly: true})
	if err != nil {
		return err
	}
	defer l.Close()
	m, err := l.Milestone(env.ctx)
	if err != nil {
		return l.wrap(err)
	}
	if m == nil || !m.Locked {
		if c.cf.json {
			writeJSON(env.stdout, map[string]any{"ok": true, "command": "unlock", "remote": l.ID(), "was_locked": false})
			return nil
		}
		fmt.Fprintf(env.stdout, "%s is not locked; nothing to do\n", l.ID())
		return nil
	}
	accepted := vault.AcceptedDevices(m)
	sort.Strings(accepted)
	if !c.cf.json {
		fmt.Fprintf(env.stdout, "%s is locked; its accepted devices are:\n", l.ID())
		for _, a := range accepted {
			fmt.Fprintf(env.stdout, "  %s\n", safe(a))
		}
	}
	if err := env.confirm(*yes, "Unlock it? Every device may then sync its local data into it, including devices that did not fetch the rebuilt vault"); err != nil {
		return err
	}
	if _, err := rep.v.Unlock(env.ctx, l.Link); err != nil {
		return l.wrap(err)
	}
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "unlock", "remote": l.ID(), "was_locked": true, "accepted": accepted})
		return nil
	}
	fmt.Fprintf(env.stdout, "unlocked %s: every device may sync with it again\n", l.ID())
	return nil
}

// confirm asks question on the terminal and succeeds on "y" or "yes";
// without a terminal it needs yes (--yes).
func (e *cliEnv) confirm(yes bool, question string) error {
	if yes {
		return nil
	}
	if !e.stdinTerminal {
		return usageError{"this changes the remote for every device: run it on a terminal to be asked, or add --yes"}
	}
	fmt.Fprintf(e.stderr, "%s [y/N] ", question)
	var answer string
	if _, err := fmt.Fscanln(e.stdin, &answer); err != nil && answer == "" {
		return usageError{"not confirmed; nothing was changed"}
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return usageError{"not confirmed; nothing was changed"}
}
