// Command livesync reads and writes Self-hosted LiveSync vaults without
// Obsidian. It keeps a local replica of a vault (a bbolt file, --store,
// default ./.livesync/store.db) and runs every command on the engine's
// vault client (engine/vault) over the adapters' remotes: CouchDB
// databases (https://user@host:5984/database), S3 journal buckets
// (s3://ACCESS_KEY@host:port/bucket/prefix/?region=R&tls=1), the approved
// peers of a peer-to-peer sync group (p2p://GROUP; "livesync p2p" manages
// the group, see p2p.go), or remotes
// named in the configuration file ($LIVESYNC_CONFIG, default
// ~/.config/livesync/config.toml; see config.example.toml). It also converts
// between vaults, folders of files and database dumps (engine/dump).
//
// This package holds only the command line: flags, configuration,
// secrets (never from a command-line argument unless asked for with
// --*-insecure-arg, never printed), output (words, --json, progress on
// stderr) and exit codes. "livesync help" lists the commands, "livesync
// COMMAND -h" their flags; the README's "The CLI" section describes them.
//
// Exit codes (every failure prints one line on stderr):
//
//	0    success
//	1    partial: some files could not be converted, read or written, a
//	     bucket's packs could not be opened (quarantined), or hunt left
//	     files held (each is named, the others were done)
//	2    usage: a wrong command line or configuration
//	3    failed: the input could not be read (malformed dump, missing
//	     file, missing chunks, bad data)
//	4    remote unreachable: connection refused, DNS, TLS, timeouts, 5xx
//	5    authentication failed: wrong user name, password or keys
//	6    wrong passphrase: the vault's data cannot be decrypted
//	7    the remote refuses to sync: locked or cleaned by another device,
//	     settings that differ from the vault's, an incompatible or newer
//	     database, no such database or bucket
//	8    local storage: disk full, the local replica cannot be written, or
//	     another livesync process holds it
//	130  interrupted (Ctrl-C) before the command finished; --watch ends
//	     with 0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/livesync-go/livesync-go/engine/store"
)

const usage = `usage: livesync <command> [flags]

commands:
  pull     copy a remote's changes into the local replica (--watch: keep following)
  push     copy the local replica's changes to a remote (--watch: keep following)
  sync     pull, then push (--watch: both ways, continuously)
  ls       list the files of the local replica (or of a remote with --remote)
  cat      print a file's bytes (missing chunks fetched from --remote)
  put      write a file into the local replica
  rm       delete a file from the local replica (a LiveSync soft deletion)
  status   what the local replica holds, and when it last met each remote
  doctor   why a remote refuses to sync, and what to do (read-only)
  hunt     which files are held (chunks missing) and why; --retry fetches them
  unlock   clear a remote's lock after another device rebuilt it
  export   a remote, the local replica or a dump -> a folder of files
  import   a folder of files -> a remote, or a dump
  p2p      peer-to-peer: sync directly with the devices of a sync group
           (livesync p2p help)
  p2p-peers  LiveSync's own P2P mode (the plugin's peers): list the
             room's peers (--wait 10s)
  p2p-sync   sync with one peer of the room: pull, then it pulls back
  p2p-host   serve the local replica to the room's auto-accepted peers
             until Ctrl-C

A remote is a CouchDB URL (https://user@host:5984/database), an S3 journal
bucket (s3://ACCESS_KEY@host:9000/bucket/prefix/?region=R&tls=1), the
approved peers of a sync group (p2p://GROUP: pull, push, sync, hunt), or a
name from the configuration file ($LIVESYNC_CONFIG, default
~/.config/livesync/config.toml).
Secrets: the server password from $LIVESYNC_PASSWORD (a bucket's secret key
from $LIVESYNC_S3_SECRET_KEY), --password-file or a prompt; the vault
passphrase from $LIVESYNC_PASSPHRASE, --passphrase-file or a prompt; the room
passphrase of p2p-peers, p2p-sync and p2p-host from
$LIVESYNC_P2P_ROOM_PASSPHRASE, --room-passphrase-file or a prompt. Never on
the command line (unless --*-insecure-arg).

Exit codes: 0 ok, 1 partial, 2 usage, 3 failed, 4 remote unreachable,
5 authentication failed, 6 wrong passphrase, 7 remote refuses to sync,
8 local storage (disk full), 130 interrupted.
Run "livesync <command> -h" for the flags of a command.
`

// Exit codes (see the package documentation).
const (
	exitOK          = 0
	exitPartial     = 1
	exitUsage       = 2
	exitFailed      = 3
	exitUnreachable = 4
	exitAuth        = 5
	exitPassphrase  = 6
	exitRefused     = 7
	exitLocal       = 8
	exitInterrupted = 130
)

// usageError marks errors in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// partialError reports that some files failed while the others succeeded.
type partialError struct {
	failed, total int
	verb          string // "converted" unless set
	msg           string // the whole message, if set
}

func (e partialError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	verb := e.verb
	if verb == "" {
		verb = "converted"
	}
	return fmt.Sprintf("%d of %d files could not be %s (see above)", e.failed, e.total, verb)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	env := &cliEnv{
		ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		stdinTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		stderrTerminal: term.IsTerminal(int(os.Stderr.Fd())),
	}
	if env.stdinTerminal {
		env.readSecret = func(prompt string) (string, error) {
			fmt.Fprint(os.Stderr, prompt)
			b, err := term.ReadPassword(int(os.Stdin.Fd()))
			fmt.Fprintln(os.Stderr)
			return string(b), err
		}
	}
	os.Exit(runEnv(env, os.Args[1:]))
}

// run executes one command with no terminal and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return runEnv(&cliEnv{ctx: ctx, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, getenv: getenv}, args)
}

// commands maps a command name to its implementation.
var commands = map[string]func(*cliEnv, []string) error{
	"export": runExport,
	"import": runImport,
	"pull":   runPull,
	"push":   runPush,
	"sync":   runSync,
	"ls":     runLs,
	"cat":    runCat,
	"put":    runPut,
	"rm":     runRm,
	"status": runStatus,
	"doctor": runDoctor,
	"hunt":   runHunt,
	"unlock": runUnlock,
	"p2p":    runP2P,

	"p2p-peers": runLSP2PPeers,
	"p2p-sync":  runLSP2PSync,
	"p2p-host":  runLSP2PHost,
}

// runEnv executes one command and returns the process exit code.
func runEnv(env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(env.stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if env.now == nil {
		env.now = time.Now
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "livesync: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	env.cmd = args[0]
	out := &answerWriter{w: env.stdout}
	env.stdout = out
	err := cmd(env, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err == nil {
		return exitOK
	}
	code, msg := classify(err)
	fmt.Fprintf(env.stderr, "livesync %s: %s\n", args[0], safe(msg))
	if env.json && !out.written { // a command that answered (a report, then a partial failure) is not answered twice
		writeJSON(env.stdout, map[string]any{"ok": false, "command": args[0], "exit_code": code, "error": msg})
	}
	return code
}

// answerWriter is stdout, noting whether the command wrote its answer.
type answerWriter struct {
	w       io.Writer
	written bool
}

func (a *answerWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		a.written = true
	}
	return a.w.Write(p)
}

// cliEnv is what a command may use of the process.
type cliEnv struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// stdinTerminal and stderrTerminal report whether stdin and stderr
	// are terminals: prompts need the first, the progress bar the second.
	stdinTerminal, stderrTerminal bool
	// readSecret reads a line from the terminal without echo; nil when
	// there is no terminal to prompt on.
	readSecret func(prompt string) (string, error)
	// now is the clock (time.Now unless a test sets it).
	now func() time.Time
	// wrapStore, if set, wraps the local replica's store once opened:
	// tests inject storage faults through it.
	wrapStore func(store.Store) store.Store

	cmd  string       // the command being run
	json bool         // --json: the command's result (or error) as JSON on stdout
	log  *slog.Logger // --verbose: what the engine does, on stderr (nil: discarded)
}

// dumpPassphrase returns the vault passphrase of a dump from
// --passphrase-insecure-arg, --passphrase-file or $LIVESYNC_PASSPHRASE
// ("" if none is set). Commands that talk to a remote use passphraseFor
// instead, which also prompts.
func (c *command) dumpPassphrase() (string, error) {
	if c.cf.passphraseArg != "" {
		return c.cf.passphraseArg, nil
	}
	if c.cf.passphraseFile != "" {
		return readSecretFile(c.cf.passphraseFile, "passphrase")
	}
	return c.getenv("LIVESYNC_PASSPHRASE"), nil
}
