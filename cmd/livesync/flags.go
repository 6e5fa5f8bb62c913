package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// newFlagSet returns a flag set that reports errors on stderr and prints
// the command's synopsis with -h.
func newFlagSet(env *cliEnv, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "usage: livesync %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// command is one run of a command: its flag set holding the common flags,
// and once parsed its positional arguments, the configuration and the
// paths to the local replica. Every command starts through it: newCommand,
// its own flags, parse, then replica, scratchReplica or connect.
type command struct {
	*cliEnv
	fs  *flag.FlagSet
	cf  commonFlags
	pos []string
	cfg *config // loaded by config
}

// newCommand returns the command name with the common flags.
func (e *cliEnv) newCommand(name, synopsis string) *command {
	c := &command{cliEnv: e, fs: newFlagSet(e, name, synopsis)}
	addCommonFlags(c.fs, &c.cf)
	return c
}

// parse parses the command line (flags anywhere) and, with --json, has
// the command answer in JSON, failures included.
func (c *command) parse(args []string) error {
	pos, err := parseArgs(c.fs, args)
	if err != nil {
		return err
	}
	c.pos = pos
	c.json = c.cf.json
	c.log = c.logger(c.cf)
	return nil
}

// config reads the configuration file once (--config, else the
// default).
func (c *command) config() (*config, error) {
	if c.cfg != nil {
		return c.cfg, nil
	}
	cfg, err := c.loadConfig(c.cf.config)
	if err != nil {
		return nil, err
	}
	c.cfg = cfg
	return cfg, nil
}

// storePath is the local replica's path: --store, else the
// configuration's, else the default.
func (c *command) storePath() (string, error) {
	cfg, err := c.config()
	if err != nil {
		return "", err
	}
	switch {
	case c.cf.store != "":
		return c.cf.store, nil
	case cfg.Store != "":
		return cfg.Store, nil
	}
	return defaultStore, nil
}

// replica opens the local replica; unless create is set, a missing one
// is an error that says to pull first.
func (c *command) replica(create bool) (*replica, error) {
	path, err := c.storePath()
	if err != nil {
		return nil, err
	}
	return c.openReplica(path, create)
}

// existingReplica opens the local replica if its file exists, else
// returns nil.
func (c *command) existingReplica() (*replica, error) {
	path, err := c.storePath()
	if err != nil || !fileExists(path) {
		return nil, err
	}
	return c.openReplica(path, false)
}

// scratchReplica opens the replica --store names, created if missing,
// else a throwaway one (export and import against a remote).
func (c *command) scratchReplica() (*replica, error) {
	if c.cf.store != "" {
		return c.openReplica(c.cf.store, true)
	}
	return c.openTempReplica()
}

// remote resolves a REMOTE argument ("" for the configuration's
// default).
func (c *command) remote(arg string) (remoteSpec, error) {
	cfg, err := c.config()
	if err != nil {
		return remoteSpec{}, err
	}
	return resolveRemote(cfg, arg)
}

// parseArgs parses flags anywhere on the command line ("pull home --json"
// as well as "pull --json home") and returns the positional arguments.
// After "--" everything is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// commonFlags are the flags of every command that uses the local replica
// or a remote.
type commonFlags struct {
	config  string
	store   string
	json    bool
	quiet   bool
	verbose bool

	passwordFile, passwordArg     string
	passphraseFile, passphraseArg string
}

func addCommonFlags(fs *flag.FlagSet, c *commonFlags) {
	fs.StringVar(&c.config, "config", "", "configuration file (default $LIVESYNC_CONFIG or ~/.config/livesync/config.toml)")
	fs.StringVar(&c.store, "store", "", "the local replica, a bbolt file (default: the configuration's store, else "+defaultStore+")")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object on stdout")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress output")
	fs.BoolVar(&c.verbose, "verbose", false, "log what the replicator does (reconnections, retries) on stderr")
	fs.StringVar(&c.passwordFile, "password-file", "", "file holding the server password or a bucket's secret key (default: $LIVESYNC_PASSWORD or $LIVESYNC_S3_SECRET_KEY, the remote's password_file or secret_key_file, or a prompt)")
	fs.StringVar(&c.passwordArg, "password-insecure-arg", "", "the server password or secret key itself (visible to other users in the process list: avoid)")
	fs.StringVar(&c.passphraseFile, "passphrase-file", "", "file holding the vault passphrase (default: $LIVESYNC_PASSPHRASE, the remote's passphrase_file, or a prompt)")
	fs.StringVar(&c.passphraseArg, "passphrase-insecure-arg", "", "the vault passphrase itself (visible to other users in the process list: avoid)")
}

// vaultFlags are the settings of a new vault (ignored for an existing one,
// whose settings come from its milestone).
type vaultFlags struct {
	encrypt, obfuscate, caseSensitive bool
	chunkSize                         int
}

func addVaultFlags(fs *flag.FlagSet, v *vaultFlags) {
	fs.BoolVar(&v.encrypt, "encrypt", false, "new vault: end-to-end encrypt it (needs a passphrase)")
	fs.BoolVar(&v.obfuscate, "obfuscate-paths", false, "new vault: obfuscate paths (needs a passphrase)")
	fs.IntVar(&v.chunkSize, "custom-chunk-size", 60, "new vault: customChunkSize (default 60, the plugin's self-hosted CouchDB preset; 10 on a journal bucket, the object-storage preset; 0: plugin default)")
	fs.BoolVar(&v.caseSensitive, "case-sensitive", false, "new vault: keep the case of paths in document ids")
}

// vaultConfig returns the new-vault settings the command line set
// explicitly.
func (v *vaultFlags) config(fs *flag.FlagSet) vaultConfig {
	var c vaultConfig
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "encrypt":
			c.E2EE = &v.encrypt
		case "obfuscate-paths":
			c.ObfuscatePaths = &v.obfuscate
		case "custom-chunk-size":
			c.CustomChunkSize = &v.chunkSize
		case "case-sensitive":
			c.CaseSensitive = &v.caseSensitive
		}
	})
	return c
}

// merge returns c with the fields of o that are set.
func (c vaultConfig) merge(o vaultConfig) vaultConfig {
	if o.E2EE != nil {
		c.E2EE = o.E2EE
	}
	if o.ObfuscatePaths != nil {
		c.ObfuscatePaths = o.ObfuscatePaths
	}
	if o.CustomChunkSize != nil {
		c.CustomChunkSize = o.CustomChunkSize
	}
	if o.CaseSensitive != nil {
		c.CaseSensitive = o.CaseSensitive
	}
	return c
}

// isSet reports whether any setting is set.
func (c vaultConfig) isSet() bool {
	return c.E2EE != nil || c.ObfuscatePaths != nil || c.CustomChunkSize != nil || c.CaseSensitive != nil
}

// describe says in a few words what settings a vault has.
func describeFlags(encrypt, obfuscate bool) string {
	var parts []string
	if encrypt {
		parts = append(parts, "end-to-end encrypted")
	} else {
		parts = append(parts, "not encrypted")
	}
	if obfuscate {
		parts = append(parts, "obfuscated paths")
	}
	return strings.Join(parts, ", ")
}
