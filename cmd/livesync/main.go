// Command livesync reads and writes Self-hosted LiveSync vaults without
// Obsidian.
//
// This first version converts between a LiveSync database dump (what
// CouchDB answers to _all_docs?include_docs=true, with the _local
// documents beside it) and a folder of files:
//
//	livesync export --dump vault.json --out ./vault   # dump -> folder
//	livesync import --dir ./vault --out vault.json    # folder -> dump
//
// The passphrase of an encrypted vault is read from the environment
// variable LIVESYNC_PASSPHRASE or from the file named by --passphrase-file,
// never from the command line, and never printed.
//
// Exit codes: 0 success; 1 some files could not be converted (each is
// reported, the others are written); 2 usage error; 3 the input could not
// be read at all (malformed dump, wrong passphrase, missing salt).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
)

const usage = `usage: livesync <command> [flags]

commands:
  export   turn a LiveSync database dump into a folder of files
  import   turn a folder of files into a LiveSync database dump

Run "livesync <command> -h" for the flags of a command.
The passphrase of an encrypted vault comes from $LIVESYNC_PASSPHRASE or --passphrase-file.
`

// Exit codes.
const (
	exitOK      = 0
	exitPartial = 1
	exitUsage   = 2
	exitFailed  = 3
)

// usageError marks errors in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// partialError reports that some files failed while the others succeeded.
type partialError struct{ failed, total int }

func (e partialError) Error() string {
	return fmt.Sprintf("%d of %d files could not be converted (see above)", e.failed, e.total)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run executes one command and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	env := &cliEnv{ctx: ctx, stdout: stdout, stderr: stderr, getenv: getenv}
	var err error
	switch args[0] {
	case "export":
		err = runExport(env, args[1:])
	case "import":
		err = runImport(env, args[1:])
	default:
		fmt.Fprintf(stderr, "livesync: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	var ue usageError
	var pe partialError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "livesync %s: %v\n", args[0], err)
		return exitUsage
	case errors.As(err, &pe):
		fmt.Fprintf(stderr, "livesync %s: %v\n", args[0], err)
		return exitPartial
	default:
		fmt.Fprintf(stderr, "livesync %s: %v\n", args[0], err)
		return exitFailed
	}
}

// cliEnv is what a command may use of the process.
type cliEnv struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// passphrase returns the vault passphrase from --passphrase-file or
// $LIVESYNC_PASSPHRASE ("" if neither is set).
func (e *cliEnv) passphrase(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the passphrase file: %w", err)
		}
		// A trailing newline is not part of the passphrase.
		s := string(b)
		for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
			s = s[:len(s)-1]
		}
		return s, nil
	}
	return e.getenv("LIVESYNC_PASSPHRASE"), nil
}
