package journalsync

import (
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// CipherFor returns the Config.Cipher of a vault with settings s whose
// bucket holds the PBKDF2 salt salt (the sync parameters' pbkdf2salt, as
// adapters/minio's Handshake returns it). It is nil, meaning plain packs,
// when s.Encrypt is off; otherwise an *e2ee.Cipher for s.Passphrase and
// salt in the vault's scheme (s.E2EEAlgorithm, the zero value meaning V2,
// and s.DynamicIterationCount), as livesync.New builds the chunk cipher,
// so packs are sealed as upstream seals them for that vault (commonlib
// JournalSyncCore.ts, engine/FORMAT.md §6.2). It derives no key: the first pack
// does. Errors wrap engine.ErrUnsupported (encryption without a
// passphrase, an unknown algorithm) or negotiate.ErrNoSalt (no salt).
func CipherFor(s livesync.Settings, salt []byte) (journal.Cipher, error) {
	if !s.Encrypt {
		return nil, nil
	}
	var alg e2ee.Algorithm
	switch s.E2EEAlgorithm {
	case "", livesync.E2EEV2:
		alg = e2ee.AlgV2
	case livesync.E2EEV1:
		alg = e2ee.AlgV1
	case livesync.E2EEForceV1:
		alg = e2ee.AlgForceV1
	default:
		return nil, fmt.Errorf("journalsync: unknown E2EE algorithm %q: %w", s.E2EEAlgorithm, engine.ErrUnsupported)
	}
	switch {
	case s.Passphrase == "":
		return nil, fmt.Errorf("journalsync: encryption is on but the passphrase is empty: %w", engine.ErrUnsupported)
	case len(salt) == 0:
		return nil, fmt.Errorf("journalsync: an encrypted journal needs the bucket's salt (from the handshake): %w", negotiate.ErrNoSalt)
	}
	return e2ee.New(s.Passphrase, salt, e2ee.Options{Algorithm: alg, DynamicIterationCount: s.DynamicIterationCount}), nil
}
