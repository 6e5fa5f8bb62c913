package vault

// Finding is one diagnosis of a doctor check of a remote or a replica.
type Finding struct {
	// Check names what was examined ("server", "milestone", "chunks"…).
	Check string `json:"check"`
	// Status is FindingOK, FindingWarning, FindingProblem or
	// FindingSkipped.
	Status  string   `json:"status"`
	Message string   `json:"message"`
	Details []string `json:"details,omitempty"`
	// Advice says what to do about a warning or a problem.
	Advice string `json:"advice,omitempty"`
	// Commands are the livesync command lines the advice names, as
	// argument lists without the program name, ready to run.
	Commands [][]string `json:"commands,omitempty"`
	// Code classifies a problem for exit codes (0 for the others).
	Code int `json:"-"`
}

// Finding states.
const (
	FindingOK      = "ok"
	FindingWarning = "warning"
	FindingProblem = "problem"
	FindingSkipped = "skipped"
)
