//go:build !js && !wasip1

package store_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/store"
)

// TestChunkRevNode has Node compute, from the vault dumps themselves,
// the revision the plug-in's browser build gives each chunk: md5 of the
// UTF-8 bytes of JSON.stringify({_id, data, type}) (spark-md5 hashes
// UTF-8; Node's crypto is told "utf8" here). ChunkRev must agree on all
// 584 chunks, most of them non-ASCII. Without node on PATH it fails
// under CI and skips otherwise.
func TestChunkRevNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not on PATH under CI")
		}
		t.Skip("node is not on PATH")
	}
	chunks := vaultDumpChunks(t)
	out, err := exec.Command(node, "-e", `
const fs = require("fs"), crypto = require("crypto");
const revs = {};
for (const f of process.argv.slice(1)) {
  for (const r of JSON.parse(fs.readFileSync(f, "utf8")).local.allDocs) {
    const d = r.doc;
    if (d.type !== "leaf") continue;
    const s = JSON.stringify({ _id: d._id, data: d.data, type: d.type });
    revs[d._id] = "1-" + crypto.createHash("md5").update(s, "utf8").digest("hex");
  }
}
process.stdout.write(JSON.stringify(revs));`,
		testvectors.Path("vault-dump-plain.json"), testvectors.Path("vault-dump-e2ee.json")).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want map[string]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(chunks) {
		t.Fatalf("node hashed %d chunks, want %d", len(want), len(chunks))
	}
	for _, c := range chunks {
		if got := store.ChunkRev(c.ID, c.Data); got != want[c.ID] {
			t.Errorf("ChunkRev(%s) = %s, UTF-8 md5 of JSON.stringify is %s", c.ID, got, want[c.ID])
		}
	}
}
