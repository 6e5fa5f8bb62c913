package doctor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Milestone judges a remote's milestone, read as raw (readErr: the
// read's error; not found means none yet), as the handshake would for the
// local replica's node (a new device's without one) announcing my,
// without writing it. It returns the remote's settings (its preferred
// ones, else this device's) and whether the checks may go on: a refused
// device can still have the data checked.
func (f *Findings) Milestone(raw []byte, readErr error, my negotiate.ChunkRange) (livesync.Settings, bool) {
	var m *negotiate.Milestone
	switch {
	case errors.Is(readErr, engine.ErrNotFound):
	case readErr != nil:
		code, msg := f.Explain(readErr)
		f.Problem("milestone", code, "the milestone could not be read: "+msg, "")
		return livesync.Settings{}, false
	default:
		var err error
		if m, err = negotiate.ParseMilestone(raw); err != nil {
			f.Problem("milestone", f.O.Codes.Refused, "the milestone document is damaged: "+err.Error(),
				"rebuild the remote from a device that has the whole vault (the plugin's \"Rebuild everything\")")
			return livesync.Settings{}, false
		}
	}
	pref, hasPref := negotiate.TweakValues{}, false
	if m != nil {
		pref, hasPref = m.TweakValues[negotiate.PreferredNode]
	}
	local := f.O.Local
	current := pref
	if local.Present && local.NodeIDErr != nil {
		f.Warn("milestone", "the local replica's node id cannot be read: "+local.NodeIDErr.Error(), "")
	}
	if local.Tweaks != nil {
		current = *local.Tweaks
	} else if !hasPref {
		current = f.O.NewVault
	}
	// The remote's data is written with its preferred settings; this
	// device's are compared with them below.
	remoteTweaks := current
	if hasPref {
		remoteTweaks = pref
	}
	s, err := vault.SettingsOf(remoteTweaks)
	if err != nil {
		f.Problem("settings", f.O.Codes.Refused, err.Error(), "")
		return s, false
	}
	if m == nil {
		f.OK("milestone", "no milestone yet: the vault is new (the first sync writes it with this device's settings)")
		return s, true
	}
	f.verdict(m, negotiate.Check(m, local.NodeID, my, current, negotiate.CheckOptions{}), s)
	return s, true
}

// verdict adds the finding of a milestone verdict.
func (f *Findings) verdict(m *negotiate.Milestone, v negotiate.Verdict, s livesync.Settings) {
	switch v.Kind {
	case negotiate.VerdictOK:
		f.OK("milestone", "the remote accepts this device: "+Describe(s))
	case negotiate.VerdictLocked:
		f.OK("milestone", "the remote is locked, and this device is among its accepted devices")
	case negotiate.VerdictNodeLocked, negotiate.VerdictNodeCleaned:
		what := "locked: another device rebuilt it"
		if v.Kind == negotiate.VerdictNodeCleaned {
			what = "cleaned up by another device"
		}
		who := "this device is not"
		if f.O.Local.NodeID == "" {
			who = "a new device is not"
		}
		advice, commands := f.joinAdvice()
		f.Add(vault.Finding{Check: "milestone", Status: vault.FindingProblem, Code: f.O.Codes.Refused, Advice: advice, Commands: commands,
			Message: fmt.Sprintf("the remote was %s, and %s among its accepted devices (%s)", what, who, strings.Join(negotiate.AcceptedDevices(m), ", "))})
	case negotiate.VerdictIncompatible:
		f.Problem("milestone", f.O.Codes.Refused, "the chunk formats of the vault's devices do not overlap with this one's",
			"update every device to the newest version")
	case negotiate.VerdictMismatched:
		var diffs []string
		for _, df := range v.Diffs {
			diffs = append(diffs, fmt.Sprintf("%s: the remote prefers %s, this replica has %s (%s)", df.Key, df.Preferred, df.Current, impactWords(df.Impact)))
		}
		fresh, rebuild := f.Command(PullFresh), f.Command(PushRebuild)
		f.Add(vault.Finding{Check: "settings", Status: vault.FindingProblem, Code: f.O.Codes.Refused, Message: "the local replica's settings differ from the remote's preferred ones:", Details: diffs,
			Commands: commands(fresh, rebuild),
			Advice: fmt.Sprintf("use a fresh local replica, which adopts the remote's settings: %s; or, if this replica's settings are the right ones and it holds the whole vault, rebuild the remote with them: %s (every other device must then fetch it again)",
				f.Line(fresh), f.Line(rebuild))})
	}
}

// joinAdvice is what to run on a remote locked for this device: an
// empty (or no) replica joins as it pulls; one that holds documents
// must discard them first, or the lock be cleared.
func (f *Findings) joinAdvice() (string, [][]string) {
	empty := !f.O.Local.Present || f.O.Local.Empty
	pull := f.Command(Pull)
	if !empty {
		pull = f.Command(PullRebuildLocal)
	}
	unlock := f.Command(Unlock)
	cmds := commands(pull, unlock)
	if empty {
		return fmt.Sprintf("fetch it: %s (an empty replica joins the accepted devices as it pulls); or clear the lock: %s",
			f.Line(pull), f.Line(unlock)), cmds
	}
	return fmt.Sprintf("discard this replica's documents and fetch everything again: %s; or, if this replica's data should win, clear the lock (%s) and push",
		f.Line(pull), f.Line(unlock)), cmds
}

// commands lists the command lines that are set (nil without any).
func commands(lines ...[]string) [][]string {
	var out [][]string
	for _, l := range lines {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

func impactWords(i negotiate.Impact) string {
	switch i {
	case negotiate.ImpactBreaking:
		return "changing it needs a rebuild"
	case negotiate.ImpactLossy:
		return "compatible, but some data would be re-encoded"
	}
	return i.String()
}
