package hunt

import (
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
)

func ids(s ...string) []engine.ChunkID { return s }

func settle() { synctest.Wait() }
