package engine

import (
	"errors"
	"fmt"
	"testing"
)

func TestPermanent(t *testing.T) {
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
	base := &Error{Op: "read", Stage: StageTransport, Err: ErrNotFound}
	p := Permanent(base)
	if !IsPermanent(p) || !IsPermanent(fmt.Errorf("outer: %w", p)) {
		t.Error("the mark is lost")
	}
	if IsPermanent(base) || IsPermanent(errors.New("x")) {
		t.Error("an unmarked error is permanent")
	}
	var e *Error
	if !errors.Is(p, ErrNotFound) || !errors.As(p, &e) || e != base {
		t.Error("the marked error is hidden")
	}
	if p.Error() != base.Error() {
		t.Errorf("message %q, want %q", p.Error(), base.Error())
	}
	if Permanent(p) != p {
		t.Error("marking twice wraps twice")
	}
}
