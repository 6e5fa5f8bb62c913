package negotiatetest_test

import (
	"testing"

	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
)

func TestMemPort(t *testing.T) {
	for _, journal := range []bool{false, true} {
		negotiatetest.PortSuite(t, func(*testing.T) negotiate.Port { return negotiatetest.NewMemPort(journal) }, negotiate.CouchDBChunkRange)
	}
}
