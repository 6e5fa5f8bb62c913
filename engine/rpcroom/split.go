package rpcroom

// unitBytes returns how many bytes TextEncoder writes for units[i] within
// the string units[s:e]: 1 to 3 for a BMP character, 4 for a high
// surrogate followed by its low half (which then counts 0), and 3 for a
// surrogate without its partner in the range, which TextEncoder writes
// as U+FFFD.
func unitBytes(units []uint16, s, e, i int) int {
	u := units[i]
	switch {
	case u < 0x80:
		return 1
	case u < 0x800:
		return 2
	case isHigh(u) && i+1 < e && isLow(units[i+1]):
		return 4
	case isLow(u) && i > s && isHigh(units[i-1]):
		return 0
	}
	return 3
}

// EncodedLen returns TextEncoder's UTF-8 byte length for the string with
// code units units (commonlib src/rpc/chunking.ts estimateBytes): a lone
// surrogate counts as the 3 bytes of U+FFFD.
func EncodedLen(units []uint16) int {
	n := 0
	for i := range units {
		n += unitBytes(units, 0, len(units), i)
	}
	return n
}

// SplitUTF16 splits the string with code units payload into the parts
// commonlib's splitIntoChunks (src/rpc/chunking.ts) makes: one part when
// its UTF-8 length is at most maxBytes (or maxBytes <= 0); otherwise
// consecutive parts of at most max(16, maxBytes/2) code units, each
// shortened one unit at a time until its UTF-8 length (lone surrogates
// counted as U+FFFD) is at most maxBytes or it is one unit long. A part
// may end with the high half of a surrogate pair whose low half starts
// the next part. The parts share payload's backing array.
func SplitUTF16(payload []uint16, maxBytes int) [][]uint16 {
	if maxBytes <= 0 || EncodedLen(payload) <= maxBytes {
		return [][]uint16{payload}
	}
	step := max(16, maxBytes/2)
	var parts [][]uint16
	for cursor := 0; cursor < len(payload); {
		end := min(len(payload), cursor+step)
		n := 0
		for i := cursor; i < end; i++ {
			n += unitBytes(payload, cursor, end, i)
		}
		for end-cursor > 1 && n > maxBytes {
			// Dropping the last unit: a pair loses its low half and
			// its high half now counts 3 instead of 4.
			last := end - 1
			if isLow(payload[last]) && last > cursor && isHigh(payload[last-1]) {
				n--
			} else {
				n -= unitBytes(payload, cursor, end, last)
			}
			end = last
		}
		parts = append(parts, payload[cursor:end])
		cursor = end
	}
	return parts
}
