package sink

import (
	"net/http"
	"strconv"
	"strings"
)

// A reader of RFC 8941 structured-field lists, as much as the IETF
// rate-limit fields need: items with parameters, whose bare items may be
// any of integer, decimal, string, token, byte sequence or boolean (only
// integer parameter values are read back). Inner lists are not accepted.

// sfItem is one list member: its parameters' integer values (absent from
// ints when not an integer) and every parameter's key.
type sfItem struct {
	ints map[string]int64
	keys map[string]bool
}

// int returns parameter k as a count: a non-negative integer ≤ maxCount.
func (it sfItem) int(k string) (int, bool) {
	v, ok := it.ints[k]
	if !ok || v < 0 || v > maxCount {
		return 0, false
	}
	return int(v), true
}

func (it sfItem) has(k string) bool { return it.keys[k] }

// sfList parses header field name as a list. present is whether the field
// was sent; ok whether it parsed.
func sfList(h http.Header, name string) (items []sfItem, ok, present bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return nil, false, false
	}
	p := &sfParser{s: strings.Trim(strings.Join(vs, ","), " \t")}
	for p.s != "" {
		it, ok := p.item()
		if !ok {
			return nil, false, true
		}
		items = append(items, it)
		p.s = strings.TrimLeft(p.s, " \t")
		if p.s == "" {
			break
		}
		if p.s[0] != ',' {
			return nil, false, true
		}
		p.s = strings.TrimLeft(p.s[1:], " \t")
		if p.s == "" {
			return nil, false, true // a trailing comma
		}
	}
	return items, len(items) > 0, true
}

type sfParser struct{ s string }

func (p *sfParser) item() (sfItem, bool) {
	if _, _, ok := p.bare(); !ok {
		return sfItem{}, false
	}
	it := sfItem{ints: map[string]int64{}, keys: map[string]bool{}}
	for p.s != "" && p.s[0] == ';' {
		p.s = strings.TrimLeft(p.s[1:], " ")
		k := p.key()
		if k == "" {
			return sfItem{}, false
		}
		it.keys[k] = true
		delete(it.ints, k) // a repeated key: the last one counts
		if p.s == "" || p.s[0] != '=' {
			continue // boolean true
		}
		p.s = p.s[1:]
		v, isInt, ok := p.bare()
		if !ok {
			return sfItem{}, false
		}
		if isInt {
			it.ints[k] = v
		}
	}
	return it, true
}

// key reads a parameter key: lcalpha or "*", then lcalpha, digits, "_-.*".
func (p *sfParser) key() string {
	i := 0
	for i < len(p.s) {
		c := p.s[i]
		if !(c >= 'a' && c <= 'z' || c == '*' || i > 0 && (c >= '0' && c <= '9' || strings.IndexByte("_-.", c) >= 0)) {
			break
		}
		i++
	}
	k := p.s[:i]
	p.s = p.s[i:]
	return k
}

// bare reads one bare item; v holds an integer's value (isInt).
func (p *sfParser) bare() (v int64, isInt, ok bool) {
	if p.s == "" {
		return 0, false, false
	}
	switch c := p.s[0]; {
	case c == '"':
		return 0, false, p.str()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == ':':
		end := strings.IndexByte(p.s[1:], ':')
		if end < 0 || strings.Trim(p.s[1:end+1], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != "" {
			return 0, false, false
		}
		p.s = p.s[end+2:]
		return 0, false, true
	case c == '?':
		if len(p.s) < 2 || (p.s[1] != '0' && p.s[1] != '1') {
			return 0, false, false
		}
		p.s = p.s[2:]
		return 0, false, true
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '*':
		i := 1
		for i < len(p.s) && (isTchar(p.s[i]) || p.s[i] == ':' || p.s[i] == '/') {
			i++
		}
		p.s = p.s[i:]
		return 0, false, true
	}
	return 0, false, false
}

// str reads a quoted string (escapes \" and \\, printable ASCII only).
func (p *sfParser) str() bool {
	for i := 1; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == '\\':
			if i+1 >= len(p.s) || (p.s[i+1] != '"' && p.s[i+1] != '\\') {
				return false
			}
			i++
		case c == '"':
			p.s = p.s[i+1:]
			return true
		case c < 0x20 || c > 0x7e:
			return false
		}
	}
	return false
}

// number reads an integer (at most 15 digits) or a decimal (at most 12
// digits, a point, 1 to 3 digits).
func (p *sfParser) number() (int64, bool, bool) {
	i := 0
	if p.s[0] == '-' {
		i = 1
	}
	start, dot := i, -1
	for i < len(p.s) && (p.s[i] >= '0' && p.s[i] <= '9' || p.s[i] == '.' && dot < 0) {
		if p.s[i] == '.' {
			dot = i
		}
		i++
	}
	num := p.s[:i]
	p.s = p.s[i:]
	if dot >= 0 {
		intDigits, frac := dot-start, i-dot-1
		return 0, false, intDigits >= 1 && intDigits <= 12 && frac >= 1 && frac <= 3
	}
	if i-start < 1 || i-start > 15 {
		return 0, false, false
	}
	v, err := strconv.ParseInt(num, 10, 64)
	return v, err == nil, err == nil
}

func isTchar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
