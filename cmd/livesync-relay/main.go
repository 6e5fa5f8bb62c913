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
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
)

const usage = `usage: livesync-relay [flags]
       livesync-relay SUBCOMMAND [flags]

A LiveSync-compatible CouchDB-protocol server for Obsidian's Self-hosted LiveSync
plugin, with its data in a folder. Without flags or configuration it listens on
127.0.0.1:5984, keeps its data in ./livesync-data and prints how to connect.

flags:
  --config FILE            configuration file (TOML; default $LIVESYNC_RELAY_CONFIG;
                           see relay.example.toml)
  --listen HOST:PORT       listen address (default 127.0.0.1:5984)
  --data-dir DIR           data folder (default ./livesync-data)
  --reset-admin-password   generate and print a new password for the built-in admin
  --check-config           read and check the configuration (and the secrets it
                           names), print what is wrong or "configuration OK", and
                           exit without listening or connecting
  --tls-self-signed        serve HTTPS with a self-signed certificate, made once and
                           kept in the data folder ([tls] self_signed = true)
  --log-format text|json   log format on stderr (default text)
  --log-level LEVEL        debug, info, warn or error (default info)

environment:
  LIVESYNC_RELAY_CONFIG               configuration file, if --config is not given
  LIVESYNC_RELAY_ADMIN_USER           built-in admin's name (default admin)
  LIVESYNC_RELAY_ADMIN_PASSWORD       built-in admin's password (never stored)
  LIVESYNC_RELAY_ADMIN_PASSWORD_FILE  a file holding it
  LIVESYNC_RELAY_CPUPROFILE           write a Go CPU profile of the whole run to this
                                      file (diagnostics; written at a clean stop)
  LIVESYNC_RELAY_MEMPROFILE           write a Go heap profile to this file at a clean
                                      stop (diagnostics: what the relay still holds)
`

// Exit codes.
const (
	exitOK      = 0 // stopped by a signal after a clean shutdown
	exitFailure = 1 // could not start (port taken, data folder) or stopped with an error
	exitUsage   = 2 // wrong flags or configuration
)

// usageError is a wrong command line or configuration (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "livesync-relay: second signal: exiting at once; held documents saved at the last periodic save are kept")
		os.Exit(exitFailure)
	}()
	stopProfile := startCPUProfile(os.Getenv("LIVESYNC_RELAY_CPUPROFILE"))
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil)
	stopProfile()
	writeHeapProfile(os.Getenv("LIVESYNC_RELAY_MEMPROFILE"))
	os.Exit(code)
}

// writeHeapProfile writes a Go heap profile to path (nothing if path is
// empty), after a collection, so that it shows what the relay still
// holds when it stops.
func writeHeapProfile(path string) {
	if path == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(path)
	if err == nil {
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "livesync-relay: heap profile: %v\n", err)
	}
}

// startCPUProfile starts a CPU profile written to path (nothing if path
// is empty) and returns what stops it.
func startCPUProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "livesync-relay: CPU profile: %v\n", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// run is the whole command: it parses args, reads the configuration,
// starts the relay, prints the banner on stderr and serves until ctx
// ends (main cancels it on SIGINT or SIGTERM). Logs go to stderr too.
// onReady, if set, is called once the relay serves (tests).
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, onReady func(*relay)) int {
	if len(args) > 0 {
		if sc, ok := subcommands[args[0]]; ok {
			return sc.run(ctx, args[1:], getenv, stderr)
		}
	}
	fs := flag.NewFlagSet("livesync-relay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var fl flagValues
	fs.StringVar(&fl.config, "config", "", "")
	fs.StringVar(&fl.listen, "listen", "", "")
	fs.StringVar(&fl.dataDir, "data-dir", "", "")
	fs.BoolVar(&fl.resetAdmin, "reset-admin-password", false, "")
	fs.BoolVar(&fl.checkConfig, "check-config", false, "")
	fs.StringVar(&fl.logFormat, "log-format", "", "")
	fs.StringVar(&fl.logLevel, "log-level", "", "")
	fs.BoolVar(&fl.tlsSelfSigned, "tls-self-signed", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stderr, usage+subcommandUsage())
			return exitOK
		}
		fmt.Fprintf(stderr, "livesync-relay: %v\n\n%s", err, usage+subcommandUsage())
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "livesync-relay: unexpected argument %q\n\n%s", fs.Arg(0), usage+subcommandUsage())
		return exitUsage
	}

	fc := &fileConfig{}
	if fl.config == "" {
		fl.config = getenv(envConfig)
	}
	if fl.config != "" {
		var err error
		if fc, err = loadConfig(fl.config); err != nil {
			fmt.Fprintf(stderr, "livesync-relay: %v\n", err)
			return exitUsage
		}
	}
	s, err := resolve(fc, fl, getenv)
	if err == nil {
		err = checkNoDataDirAdmin(s, getenv)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if fl.checkConfig {
		fmt.Fprintf(stderr, "livesync-relay: configuration OK (%s)\n", describeConfig(fl.config, s))
		return exitOK
	}
	log := newLogger(stderr, s)
	r, err := startRelay(ctx, s, log, getenv)
	if err != nil {
		return fail(stderr, err)
	}
	r.printBanner(stderr)
	r.admin.password = "" // printed once; not kept
	if s.noDataDir() {
		log.Info("serving", "url", r.url, "data_dir", "(none: every database is kept on CouchDB)", "admin", r.admin.name, "admin_source", r.admin.source)
	} else {
		log.Info("serving", "url", r.url, "data_dir", s.dataDir, "admin", r.admin.name, "admin_source", r.admin.source)
	}
	if onReady != nil {
		onReady(r)
	}
	if err := r.serve(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFailure
	}
	return exitOK
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "livesync-relay: %v\n", err)
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFailure
}

// newLogger writes structured logs (text or JSON) to w.
func newLogger(w io.Writer, s *settings) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.logLevel}
	if s.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// describeConfig says in one line what a checked configuration sets up.
func describeConfig(path string, s *settings) string {
	where := "no configuration file"
	if path != "" {
		where = path
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d database(s)", where, len(s.databases))
	if n := len(s.stores); n > 0 {
		fmt.Fprintf(&b, ", %d kept on CouchDB", n)
	}
	if s.noDataDir() {
		b.WriteString(", no data folder")
	} else {
		fmt.Fprintf(&b, ", data folder %s", s.dataDir)
	}
	return b.String()
}
