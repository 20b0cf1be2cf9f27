package bulk

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting of one JSON value, as encoding/json does, so
// that every value taken passes json.Valid.
const maxDepth = 10000

// The flags str reports about a string's contents.
const (
	hasEscape = 1 << iota // a backslash escape
	hasHigh               // a byte of 0x80 or more
)

// special marks the bytes a string scan must stop at: the closing quote,
// the backslash, control characters and non-ASCII bytes.
var special = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80
	}
	return t
}()

// specialIn marks, in the high bit of each byte of x (8 bytes of a string,
// little-endian), the bytes special says a string scan stops at. A byte
// below a marked one may be marked wrongly (a borrow), so only the lowest
// mark is exact.
func specialIn(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((q - ones) | (bs - ones) | (x - ones*0x20) | x) & highs
}

// syntaxError is a place in the body where JSON could not be read.
type syntaxError struct {
	off int    // byte offset in the body
	msg string // what was found and what would be valid
}

// Error returns the message; Parse adds where it happened.
func (e *syntaxError) Error() string { return e.msg }

// scanner checks JSON syntax over buf, which ends at the body's end or, for
// NDJSON, at the current line's end. Offsets are into the body throughout.
type scanner struct {
	buf   []byte
	line  bool   // buf ends at a line's end (NDJSON)
	stack []byte // the containers open in the value being read
}

// ws returns the offset of the first non-whitespace byte at or after i.
func (s *scanner) ws(i int) int {
	if i < len(s.buf) && s.buf[i] > ' ' {
		return i
	}
	return s.wsSlow(i)
}

// wsSlow is ws past whitespace.
func (s *scanner) wsSlow(i int) int {
	for i < len(s.buf) {
		switch s.buf[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// fail reports what was found at i, and want, what would be valid there.
func (s *scanner) fail(i int, want string) *syntaxError {
	var found string
	switch {
	case i >= len(s.buf) && s.line:
		found = "the line ends"
	case i >= len(s.buf):
		found = "the body ends"
	case s.buf[i] >= 0x20 && s.buf[i] < 0x7f:
		found = "found " + strconv.QuoteRune(rune(s.buf[i]))
	default:
		found = "found byte 0x" + strconv.FormatUint(uint64(s.buf[i]), 16)
	}
	return &syntaxError{off: i, msg: found + "; want " + want}
}

// value reads the JSON value that starts at i (whitespace skipped) and
// returns the offset just past it.
func (s *scanner) value(i int) (int, error) {
	s.stack = s.stack[:0]
	for {
		var err error
		i = s.ws(i)
		if i >= len(s.buf) {
			return i, s.fail(i, "a JSON value")
		}
		switch c := s.buf[i]; c {
		case '{', '[':
			if len(s.stack) == maxDepth {
				return i, &syntaxError{off: i, msg: "values nest deeper than 10000 levels; at most 10000 are allowed"}
			}
			s.stack = append(s.stack, c)
			i = s.ws(i + 1)
			if i >= len(s.buf) || s.buf[i] != c+2 { // '{'+2 is '}', '['+2 is ']'
				if c == '{' {
					i, err = s.key(i, "a string key or '}'")
				}
				if err != nil {
					return i, err
				}
				continue
			}
			s.stack = s.stack[:len(s.stack)-1]
			i++
		case '"':
			i, _, err = s.str(i)
		default:
			i, err = s.scalar(i)
		}
		if err != nil {
			return i, err
		}
		var done bool
		if i, done, err = s.after(i); done || err != nil {
			return i, err
		}
	}
}

// after reads past the closing brackets that follow a value at i, and past
// the comma (and key) before the next one. done: the outermost value ended.
func (s *scanner) after(i int) (int, bool, error) {
	for len(s.stack) > 0 {
		i = s.ws(i)
		top := s.stack[len(s.stack)-1]
		if i < len(s.buf) {
			switch s.buf[i] {
			case ',':
				if top == '{' {
					i, err := s.key(s.ws(i+1), "a string key")
					return i, false, err
				}
				return i + 1, false, nil
			case top + 2:
				s.stack = s.stack[:len(s.stack)-1]
				i++
				continue
			}
		}
		if top == '{' {
			return i, false, s.fail(i, "',' or '}' after an object member")
		}
		return i, false, s.fail(i, "',' or ']' after an array element")
	}
	return i, true, nil
}

// key reads an object key at i, and the colon after it; want says what
// would be valid at i.
func (s *scanner) key(i int, want string) (int, error) {
	if i >= len(s.buf) || s.buf[i] != '"' {
		return i, s.fail(i, want)
	}
	i, _, err := s.str(i)
	if err != nil {
		return i, err
	}
	return s.colon(i)
}

// colon reads the ':' after a key, with whitespace on either side.
func (s *scanner) colon(i int) (int, error) {
	i = s.ws(i)
	if i >= len(s.buf) || s.buf[i] != ':' {
		return i, s.fail(i, "':' after an object key")
	}
	return s.ws(i + 1), nil
}

// str reads the string whose opening quote is at i and returns the offset
// past its closing quote, with what it holds (hasEscape, hasHigh).
func (s *scanner) str(i int) (int, int, error) {
	b := s.buf
	flags := 0
	for j := i + 1; j < len(b); {
		if j+8 <= len(b) {
			if m := specialIn(binary.LittleEndian.Uint64(b[j:])); m == 0 {
				j += 8
				continue
			} else {
				j += bits.TrailingZeros64(m) / 8
			}
		}
		c := b[j]
		if !special[c] {
			j++
			continue
		}
		switch {
		case c == '"':
			return j + 1, flags, nil
		case c == '\\':
			flags |= hasEscape
			n, err := s.escape(j)
			if err != nil {
				return j, 0, err
			}
			j += n
		case c < 0x20:
			return j, 0, s.fail(j, `a string character; control characters are escaped (\n, \t, \u0000)`)
		default:
			flags |= hasHigh
			j++
		}
	}
	return len(b), 0, s.fail(len(b), `the closing '"' of a string`)
}

// escape checks the escape whose backslash is at j and returns its length.
func (s *scanner) escape(j int) (int, error) {
	const want = `an escape: \" \\ \/ \b \f \n \r \t or \u and four hex digits`
	b := s.buf
	if j+1 >= len(b) {
		return 0, s.fail(j+1, want)
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for k := j + 2; k < j+6; k++ {
			if k >= len(b) || !isHex(b[k]) {
				return 0, s.fail(k, `four hex digits after \u`)
			}
		}
		return 6, nil
	}
	return 0, s.fail(j+1, want)
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isDigit reports whether c is a decimal digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scalar reads the number, true, false or null at i.
func (s *scanner) scalar(i int) (int, error) {
	lit := ""
	switch s.buf[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	default:
		return s.number(i)
	}
	for k := 1; k < len(lit); k++ {
		if i+k >= len(s.buf) || s.buf[i+k] != lit[k] {
			return i + k, s.fail(i+k, "the rest of "+lit)
		}
	}
	return i + len(lit), nil
}

// number reads the JSON number at i.
func (s *scanner) number(i int) (int, error) {
	b := s.buf
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && isDigit(b[j]):
		j = s.digits(j)
	case j == i:
		return j, s.fail(j, "a JSON value: an object, array, string, number, true, false or null")
	default:
		return j, s.fail(j, "a digit after '-'")
	}
	if j < len(b) && b[j] == '.' {
		if j+1 >= len(b) || !isDigit(b[j+1]) {
			return j + 1, s.fail(j+1, "a digit after '.'")
		}
		j = s.digits(j + 1)
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || !isDigit(b[j]) {
			return j, s.fail(j, "a digit in the exponent")
		}
		j = s.digits(j)
	}
	return j, nil
}

// digits returns the offset past the run of digits at j.
func (s *scanner) digits(j int) int {
	for j < len(s.buf) && isDigit(s.buf[j]) {
		j++
	}
	return j
}

// text returns the string s.str read from quoted (quotes included), decoded
// as encoding/json does: escapes resolved, invalid UTF-8 made U+FFFD.
func text(quoted []byte, flags int) string {
	inner := quoted[1 : len(quoted)-1]
	if flags&hasEscape == 0 && (flags&hasHigh == 0 || utf8.Valid(inner)) {
		return string(inner)
	}
	var t string
	if json.Unmarshal(quoted, &t) != nil {
		return string(inner) // not reached: str checked the syntax
	}
	return t
}
