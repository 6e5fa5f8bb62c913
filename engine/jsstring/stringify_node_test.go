//go:build !js && !wasip1

package jsstring

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"unicode/utf8"
)

// TestAppendJSONStringNode compares AppendJSONString with Node's own
// JSON.stringify on random strings rich in the characters where Go and
// JavaScript differ (controls, quotes, '<' '>' '&', U+007F, U+2028/9,
// astral characters, invalid UTF-8). Without node on PATH it fails under
// CI and skips otherwise.
func TestAppendJSONStringNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not on PATH under CI")
		}
		t.Skip("node is not on PATH")
	}
	pieces := []string{"a", "Z", " ", "\"", "\\", "/", "<", ">", "&", "'", "\x00", "\x07", "\b", "\t", "\n",
		"\x0b", "\f", "\r", "\x1b", "\x1f", "\x7f", "\u0080", "\u00e9", "\u2028", "\u2029", "\ufeff",
		"\ufffd", "文", "😀", "\U0010ffff", "\xff", "\xed\xa0\x80", "\xc3"}
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := make([]string, 2000)
	for i := range inputs {
		var b []byte
		for n := rng.IntN(12); n > 0; n-- {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		inputs[i] = string(b)
	}
	for c := 0; c < 0x80; c++ {
		inputs = append(inputs, string(rune(c)))
	}
	// encoding/json turns each invalid byte into U+FFFD, the string
	// AppendJSONString reads too; Node gets the same JavaScript strings.
	in, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "-e", `
let s = ""; process.stdin.setEncoding("utf8");
process.stdin.on("data", d => s += d);
process.stdin.on("end", () => process.stdout.write(JSON.stringify(JSON.parse(s).map(x => JSON.stringify(x)))));`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(inputs) {
		t.Fatalf("node answered %d strings (%v)", len(want), err)
	}
	for i, s := range inputs {
		if !utf8.ValidString(want[i]) {
			t.Fatalf("node output %d is not UTF-8", i)
		}
		if got := string(AppendJSONString(nil, s)); got != want[i] {
			t.Errorf("AppendJSONString(%q) = %q, JSON.stringify gives %q", s, got, want[i])
		}
	}
}
