package rpcroom

import (
	"strings"
	"time"
)

// DefaultTimeout is the timeout of a call whose method has no entry in
// MethodTimeout's table (commonlib src/replication/trystero/types.ts
// DEFAULT_RPC_TIMEOUT).
const DefaultTimeout = 30 * time.Second

// methodTimeouts maps the last segment of a LiveSync P2P method to the
// timeout LiveSync's own callers pass (commonlib
// src/replication/trystero/TrysteroReplicator.ts and
// TrysteroReplicatorP2PClient.ts); 0 means none.
var methodTimeouts = map[string]time.Duration{
	"bulkGet":                40 * time.Second, // BULK_GET_RPC_TIMEOUT
	"!reqAuth":               20 * time.Second,
	"getTweakSettings":       5 * time.Second,
	"onProgressAcknowledged": 500 * time.Millisecond,
	"reqSync":                0,
	"onProgress":             0,
	"getAllConfig":           0,
	"requestBroadcasting":    0,
	"getIsBroadcasting":      0,
}

// MethodTimeout returns the timeout LiveSync uses when it calls method,
// 0 meaning the call waits for its answer however long it takes.
//
// commonlib's RpcRoom itself has no per-method table: invoke takes a
// timeout (default 30000 ms) and LiveSync's replicator passes the value
// at each call site, naming the method before toRpcMethodName
// (src/replication/trystero/rpcCompat.ts) prefixes "db." or "legacy/".
// MethodTimeout therefore matches the part after the last "." or "/":
// "db.bulkGet" 40 s, "legacy/!reqAuth" 20 s, "legacy/getTweakSettings"
// 5 s, "legacy/onProgressAcknowledged" 500 ms, and none for
// "legacy/reqSync", "legacy/onProgress", "legacy/getAllConfig",
// "legacy/requestBroadcasting" and "legacy/getIsBroadcasting";
// everything else DefaultTimeout.
func MethodTimeout(method string) time.Duration {
	last := method[strings.LastIndexAny(method, "./")+1:]
	if d, ok := methodTimeouts[last]; ok {
		return d
	}
	return DefaultTimeout
}
