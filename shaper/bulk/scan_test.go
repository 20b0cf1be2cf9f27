package bulk

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// TestSpecialIn checks the 8-byte test against the byte table: each byte
// value, at each place in a word of plain bytes, is found exactly when the
// table marks it, and at its place.
func TestSpecialIn(t *testing.T) {
	for c := range 256 {
		for at := range 8 {
			w := []byte("abcdefgh")
			w[at] = byte(c)
			m := specialIn(binary.LittleEndian.Uint64(w))
			switch {
			case special[c] && (m == 0 || bits.TrailingZeros64(m)/8 != at):
				t.Errorf("byte 0x%02x at %d: mark %#x", c, at, m)
			case !special[c] && m != 0:
				t.Errorf("byte 0x%02x at %d: marked %#x", c, at, m)
			}
		}
	}
}
