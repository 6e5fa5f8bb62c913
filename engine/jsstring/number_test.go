package jsstring

import (
	"bytes"
	"math"
	"testing"
)

func TestNumber(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"", 0}, {"  ", 0}, {"12", 12}, {" 12\n", 12}, {"+3", 3}, {"-1", -1}, {"1.5", 1.5}, {".5", 0.5}, {"5.", 5},
		{"1e2", 100}, {"0x1F", 31}, {"0o17", 15}, {"0b101", 5}, {"Infinity", math.Inf(1)}, {"-Infinity", math.Inf(-1)},
		{"1e999", math.Inf(1)}, {"abc", nan}, {"0x", nan}, {"-0x1", nan}, {"1_0", nan}, {"++1", nan}, {".", nan}, {"1e", nan},
		{"0xG", nan}, {"\u00a012\u3000", 12}, {"infinity", nan},
	} {
		got := Number(tc.in)
		if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && got != tc.want) {
			t.Errorf("Number(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// The two JavaScript spaces that Go's unicode.IsSpace disagrees on:
// U+0085 is not JavaScript white space, U+FEFF is.
func TestNumberSpaces(t *testing.T) {
	if got := Number("\u008512"); !math.IsNaN(got) {
		t.Errorf("Number(NEL 12) = %v, want NaN", got)
	}
	if got := Number("\ufeff12\ufeff"); got != 12 {
		t.Errorf("Number(BOM 12 BOM) = %v, want 12", got)
	}
	if got := Number("0x10000000000000000"); got != 18446744073709551616 {
		t.Errorf("Number(2^64 in hex) = %v", got)
	}
}

func TestAtob(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []byte
		ok   bool
	}{
		{"", []byte{}, true}, {"YQ==", []byte("a"), true}, {"YQ", []byte("a"), true}, {" Y Q = = ", []byte("a"), true},
		{"YWI=", []byte("ab"), true}, {"YR==", []byte("a"), true}, {"Y", nil, false}, {"Y=Q=", nil, false}, {"YQ=", nil, false},
		{"Y\vQ", nil, false},
	} {
		got, ok := Atob(tc.in)
		if ok != tc.ok || (ok && !bytes.Equal(got, tc.want)) {
			t.Errorf("Atob(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
