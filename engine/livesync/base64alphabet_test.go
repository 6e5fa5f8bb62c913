package livesync

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// base64Alphabet decides as upstream's regular expression
// ^[A-Za-z0-9+/]+=*$ does, on hand-picked strings and on random ones
// drawn from the alphabet, "=" and a few outsiders.
func TestBase64AlphabetMatchesTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9+/]+=*$`)
	cases := []string{"", "=", "==", "A", "A=", "A==", "A=A", "AB+/", "ab/+==", "a b", "a\n", "é", "A=\x00", "-_", "YWJj", "YWI=", "YQ=="}
	r := rand.New(rand.NewPCG(1, 2))
	const chars = "Az09+/==-_ \né."
	for range 20000 {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := base64Alphabet(s), re.MatchString(s); got != want {
			t.Fatalf("base64Alphabet(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}
