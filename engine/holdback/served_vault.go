package holdback

import "context"

// VaultChanged tells the Served that the vault's sync parameters or
// milestone may have been written by another process that serves the
// same inner store (a client of another relay): with a passphrase, the
// hold-back is rebuilt with the vault's codec when the salt or the
// settings it was built with changed, as after a write through this
// Served. Cheap when nothing changed (two _local reads).
func (v *Served) VaultChanged(ctx context.Context) {
	if v.HasPassphrase() {
		v.rekey(ctx)
	}
}
