// Package doctor holds what the adapters' doctors share: the findings
// list, the judgment of a remote's milestone for this device, and the
// words the caller supplies (the command lines its advice names, its
// explanation of errors, its codes for problems). A doctor examines a
// remote without writing to it; couchdb.Doctor and minio.Doctor run the
// checks of their remote kind and return []vault.Finding.
package doctor

import (
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Action names a command that a finding's advice suggests.
type Action int

// The commands advice can name.
const (
	// Push writes the vault to the remote (creating a database).
	Push Action = iota
	// Pull fetches the remote into the local replica.
	Pull
	// PullRebuildLocal discards the local replica's documents and fetches
	// everything again.
	PullRebuildLocal
	// PullFresh fetches the remote into a new local replica.
	PullFresh
	// Unlock clears the remote's lock.
	Unlock
	// PushRebuild rebuilds the remote from the local replica.
	PushRebuild
)

// Codes are the caller's codes for the classes of problems (exit codes of
// a command line); Finding.Code holds one of them.
type Codes struct {
	Failed, Unreachable, Auth, Refused, Passphrase int
}

// Local is what the caller knows of its local replica.
type Local struct {
	// Present: there is a local replica.
	Present bool
	// NodeID is the replica's node id ("" for a new device); NodeIDErr
	// is the error reading it, reported as a warning.
	NodeID    string
	NodeIDErr error
	// Tweaks are the replica's must-match settings; nil when it has none
	// recorded.
	Tweaks *negotiate.TweakValues
	// Empty: the replica holds no document (or there is none).
	Empty bool
	// ChunkIDs returns a few ids of the replica's encrypted chunks, to
	// tell a changed salt from a wrong passphrase; nil means none.
	ChunkIDs func() []string
}

// Options configure a doctor run.
type Options struct {
	Local Local
	// NewVault are the settings a new vault gets from this device (used
	// when neither the replica nor the remote has any).
	NewVault negotiate.TweakValues
	// Passphrase returns the vault's passphrase; it is asked only for an
	// encrypted vault, and an error skips the checks of the data.
	Passphrase func() (string, error)
	// Command returns the command line for an action on the examined
	// remote, as arguments ready to run; Line renders one for people.
	Command func(Action) []string
	Line    func(args []string) string
	// Explain classifies an error and says it in one line; nil means
	// Codes.Failed and err.Error().
	Explain func(err error) (code int, msg string)
	// Cause says why a server cannot be reached (a transport error);
	// nil means err.Error().
	Cause func(err error) string
	Codes Codes
}

// Findings collects a doctor's findings under o's words.
type Findings struct {
	O    Options
	List []vault.Finding
}

// New returns an empty list of findings under o's words.
func New(o Options) *Findings {
	if o.Codes == (Codes{}) {
		o.Codes = Codes{Failed: 1, Unreachable: 2, Auth: 3, Refused: 4, Passphrase: 5}
	}
	return &Findings{O: o}
}

// Add appends f.
func (f *Findings) Add(x vault.Finding) { f.List = append(f.List, x) }

// OK appends a passed check.
func (f *Findings) OK(check, msg string) {
	f.Add(vault.Finding{Check: check, Status: vault.FindingOK, Message: msg})
}

// Warn appends a warning.
func (f *Findings) Warn(check, msg, advice string) {
	f.Add(vault.Finding{Check: check, Status: vault.FindingWarning, Message: msg, Advice: advice})
}

// Problem appends a problem of class code.
func (f *Findings) Problem(check string, code int, msg, advice string) {
	f.Add(vault.Finding{Check: check, Status: vault.FindingProblem, Message: msg, Advice: advice, Code: code})
}

// Skipped appends a check that was not run.
func (f *Findings) Skipped(check, msg, advice string) {
	f.Add(vault.Finding{Check: check, Status: vault.FindingSkipped, Message: msg, Advice: advice})
}

// Explain is Options.Explain.
func (f *Findings) Explain(err error) (int, string) {
	if f.O.Explain == nil {
		return f.O.Codes.Failed, err.Error()
	}
	return f.O.Explain(err)
}

// Cause is Options.Cause.
func (f *Findings) Cause(err error) string {
	if f.O.Cause == nil {
		return err.Error()
	}
	return f.O.Cause(err)
}

// Command is Options.Command (nil without one).
func (f *Findings) Command(a Action) []string {
	if f.O.Command == nil {
		return nil
	}
	return f.O.Command(a)
}

// Line is Options.Line; without one, the arguments joined by spaces.
func (f *Findings) Line(args []string) string {
	if f.O.Line == nil {
		return strings.Join(args, " ")
	}
	return f.O.Line(args)
}

// Passphrase is Options.Passphrase; without one, an error.
func (f *Findings) Passphrase() (string, error) {
	if f.O.Passphrase == nil {
		return "", fmt.Errorf("doctor: no passphrase")
	}
	return f.O.Passphrase()
}

// Describe says what a vault's settings are, in words.
func Describe(s livesync.Settings) string {
	parts := []string{"not encrypted"}
	if s.Encrypt {
		parts[0] = "end-to-end encrypted"
	}
	if s.PathObfuscation {
		parts = append(parts, "obfuscated paths")
	}
	return fmt.Sprintf("%s, chunk size %d", strings.Join(parts, ", "), s.CustomChunkSize)
}
