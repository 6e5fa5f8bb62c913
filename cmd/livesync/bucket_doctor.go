package main

import (
	"context"
	"fmt"

	"github.com/livesync-go/livesync-go/engine/vault"
)

// checkQuarantine lists the packs the local replica set aside when
// receiving from this bucket.
func (d *doctor) checkQuarantine(ctx context.Context) {
	var st *vault.RemoteState
	if d.rep != nil {
		st = d.rep.v.Remote(d.spec.String())
	}
	if st == nil || st.JournalID == "" {
		d.add(finding{Check: "quarantine", Status: statusSkipped, Message: "the local replica has received nothing from this bucket yet"})
		return
	}
	qs, err := d.rep.v.Quarantined(ctx, d.spec.String())
	if err != nil {
		d.add(finding{Check: "quarantine", Status: statusWarning, Message: "the journal's checkpoint in the local replica cannot be read: " + err.Error()})
		return
	}
	if len(qs) == 0 {
		d.add(finding{Check: "quarantine", Status: statusOK, Message: "no pack was set aside: every pack received so far opened"})
		return
	}
	var details []string
	for _, q := range qs {
		details = append(details, fmt.Sprintf("%s (%s): %s", q.Key, q.Stage, q.Err))
	}
	d.add(finding{Check: "quarantine", Status: statusWarning, Details: details,
		Message:  fmt.Sprintf("%d %s could not be opened and %s set aside; the files in them are missing here:", len(qs), plural(len(qs), "pack", "packs"), plural(len(qs), "is", "are")),
		Commands: [][]string{d.command("pull", "--retry-quarantined")},
		Advice: fmt.Sprintf("%s tries them again; if they still fail they are damaged: re-send their files from the device that wrote them",
			commandLine(d.command("pull", "--retry-quarantined")))})
}
