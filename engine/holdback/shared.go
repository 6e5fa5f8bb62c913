package holdback

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// Refresh makes this hold-back agree with the shared holding area.
func (v *Served) Refresh(ctx context.Context) error {
	return errors.New("holdback: Refresh not implemented yet")
}

// SetHunter rebuilds the hold-back with hunter h.
func (v *Served) SetHunter(ctx context.Context, h purgatory.Hunter, leader bool) error {
	return errors.New("holdback: SetHunter not implemented yet")
}
