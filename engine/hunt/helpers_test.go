package hunt

import "github.com/livesync-go/livesync-go/engine"

func ids(s ...string) []engine.ChunkID { return s }
