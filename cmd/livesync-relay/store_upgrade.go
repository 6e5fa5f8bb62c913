package main

import "github.com/livesync-go/livesync-go/engine/store/boltstore"

// logMigration logs a database file that was migrated to this build's
// store format when opened, and where the copy of it as it was is kept
// (the relay never removes it: delete it once the upgrade proved fine).
func (r *relay) logMigration(m boltstore.Migration) {
	r.log.Warn("database file upgraded to a newer store format; the file as it was is kept next to it",
		"file", m.Path, "from_format", m.From, "to_format", m.To, "copy", m.Backup)
}
