package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is a rate in events per second, written in config as 2/s, 120/m,
// 0.5/s or 1000/h. A bare number is an error: its unit would be a guess.
type Rate float64

// String formats r with the largest unit that keeps it at least 1 (2/s,
// 30/m, 1/h), so it reads back through ParseRate.
func (r Rate) String() string {
	f := float64(r)
	switch {
	case f >= 1 || f <= 0:
		return formatFloat(f) + "/s"
	case f*60 >= 1:
		return formatFloat(f*60) + "/m"
	default:
		return formatFloat(f*3600) + "/h"
	}
}

// ByteSize is a size in bytes, written in config as 512B, 64KiB, 1MiB or
// 1GiB (binary units, 1KiB = 1024B). A plain integer is a number of bytes,
// as in nats-server's max_payload.
type ByteSize int64

// String formats b with the largest binary unit that divides it (1MiB, 1536B).
func (b ByteSize) String() string {
	for _, u := range sizeUnits[1:] {
		if b != 0 && int64(b)%u.mult == 0 {
			return strconv.FormatInt(int64(b)/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

var sizeUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"GiB", 1 << 30},
	{"MiB", 1 << 20},
	{"KiB", 1 << 10},
}

// ParseRate parses a rate such as 2/s, 120/m, 0.5/s or 1000/h into events
// per second. The number is plain decimal (no sign, exponent, Inf or NaN),
// the unit is s, m or h, and the result must be finite and more than 0.
// Errors read as the tail of a config message:
// `"fast" is not a rate; write e.g. 2/s or 120/m`.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, unit, hasUnit := strings.Cut(t, "/")
	num, unit = strings.TrimSpace(num), strings.TrimSpace(unit)
	if !isDecimal(num) {
		return 0, fmt.Errorf("%q is not a rate; write e.g. 2/s or 120/m", s)
	}
	if !hasUnit {
		return 0, fmt.Errorf("%q is not a rate: it needs a unit; write e.g. %s/s or %s/m", s, num, num)
	}
	var per float64
	switch unit {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, fmt.Errorf("%q is not a rate: the unit must be s, m or h; write e.g. 2/s or 120/m", s)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q is not a rate: the number is too large", s)
	}
	r := n / per
	if !(r > 0) {
		return 0, fmt.Errorf("%q is not a rate: it must be more than 0", s)
	}
	return r, nil
}

// ParseSize parses a size such as 512B, 64KiB, 1MiB, 1GiB or a plain
// integer (bytes) into bytes. Units are binary and case-insensitive; a
// fraction is allowed when the result is a whole number of bytes (1.5KiB).
// Decimal units (KB, MB) are refused rather than guessed.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if !isDecimal(num) {
		return 0, fmt.Errorf("%q is not a size; write e.g. 512B, 64KiB or 1MiB", s)
	}
	mult := int64(-1)
	if unit == "" {
		mult = 1
	}
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.mult
		}
	}
	if mult < 0 {
		switch strings.ToUpper(unit) {
		case "K", "KB", "M", "MB", "G", "GB":
			return 0, fmt.Errorf("%q is not a size: units are binary, write e.g. 64KiB or 1MiB", s)
		}
		return 0, fmt.Errorf("%q is not a size; write e.g. 512B, 64KiB or 1MiB", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%q is not a size: it is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	b := f * float64(mult)
	if err != nil || b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a size: it is too large", s)
	}
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("%q is not a size: it is not a whole number of bytes", s)
	}
	return int64(b), nil
}

// isDecimal reports whether s is digits with at most one '.', and at least
// one digit: what ParseRate and ParseSize accept as a number.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// parseDuration is time.ParseDuration with the config's error wording.
// A bare number other than 0 is refused: "10" could mean seconds or
// nanoseconds, and mapstructure would silently pick nanoseconds.
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if isDecimal(t) {
		if n, err := strconv.ParseFloat(t, 64); err == nil && n == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("%q is not a duration: it needs a unit; write e.g. %ss or %sms", s, t, t)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; write e.g. 10s, 1m30s or 2h", s)
	}
	return d, nil
}

// FormatDuration is Duration.String without the zero tails: 1m, not 1m0s,
// the form config values and messages use.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formatFloat prints f in plain decimal with at most 6 significant digits,
// so float noise (0.9999999/h) does not show and the result parses back.
func formatFloat(f float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 6, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}
