package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     float64
		err      string // "" = no error
	}{
		{"per second", "2/s", 2, ""},
		{"per minute", "120/m", 2, ""},
		{"fraction", "0.5/s", 0.5, ""},
		{"per hour", "1000/h", 1000.0 / 3600, ""},
		{"spaces", " 3 / s ", 3, ""},
		{"bare number", "2", 0, `"2" is not a rate: it needs a unit; write e.g. 2/s or 2/m`},
		{"word", "fast", 0, `"fast" is not a rate; write e.g. 2/s or 120/m`},
		{"empty", "", 0, `"" is not a rate; write e.g. 2/s or 120/m`},
		{"bad unit", "2/d", 0, `"2/d" is not a rate: the unit must be s, m or h; write e.g. 2/s or 120/m`},
		{"zero", "0/s", 0, `"0/s" is not a rate: it must be more than 0`},
		{"negative", "-1/s", 0, `"-1/s" is not a rate; write e.g. 2/s or 120/m`},
		{"inf", "Inf/s", 0, `"Inf/s" is not a rate; write e.g. 2/s or 120/m`},
		{"nan", "NaN/s", 0, `"NaN/s" is not a rate; write e.g. 2/s or 120/m`},
		{"exponent", "1e3/s", 0, `"1e3/s" is not a rate; write e.g. 2/s or 120/m`},
		{"huge", strings.Repeat("9", 400) + "/s", 0, `is not a rate: the number is too large`},
		{"two dots", "1.2.3/s", 0, `"1.2.3/s" is not a rate; write e.g. 2/s or 120/m`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRate(tt.in)
			if tt.err != "" {
				if err == nil || !strings.HasSuffix(err.Error(), tt.err) {
					t.Fatalf("ParseRate(%q) err = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("ParseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     int64
		err      string
	}{
		{"bytes", "512B", 512, ""},
		{"KiB", "64KiB", 64 << 10, ""},
		{"MiB", "1MiB", 1 << 20, ""},
		{"GiB", "1GiB", 1 << 30, ""},
		{"plain integer is bytes", "1048576", 1 << 20, ""},
		{"case-insensitive", "1mib", 1 << 20, ""},
		{"space", "64 KiB", 64 << 10, ""},
		{"whole fraction", "1.5KiB", 1536, ""},
		{"zero", "0", 0, ""},
		{"decimal unit", "1MB", 0, `"1MB" is not a size: units are binary, write e.g. 64KiB or 1MiB`},
		{"word", "huge", 0, `"huge" is not a size; write e.g. 512B, 64KiB or 1MiB`},
		{"empty", "", 0, `"" is not a size; write e.g. 512B, 64KiB or 1MiB`},
		{"negative", "-1B", 0, `"-1B" is not a size; write e.g. 512B, 64KiB or 1MiB`},
		{"partial byte", "0.3KiB", 0, `"0.3KiB" is not a size: it is not a whole number of bytes`},
		{"overflow", "9999999999GiB", 0, `"9999999999GiB" is not a size: it is too large`},
		{"fraction overflow", "99999999999.5GiB", 0, `"99999999999.5GiB" is not a size: it is too large`},
		{"unknown unit", "1TiB", 0, `"1TiB" is not a size; write e.g. 512B, 64KiB or 1MiB`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSize(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseSize(%q) err = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSize(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestUnitStrings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"rate per second", Rate(2).String(), "2/s"},
		{"rate per minute", Rate(0.5).String(), "30/m"},
		{"rate per hour", Rate(1.0 / 3600).String(), "1/h"},
		{"size MiB", ByteSize(1 << 20).String(), "1MiB"},
		{"size bytes", ByteSize(1000).String(), "1000B"},
		{"size KiB", ByteSize(1536).String(), "1536B"},
		{"size zero", ByteSize(0).String(), "0B"},
		{"duration", FormatDuration(time.Minute), "1m"},
		{"duration hours", FormatDuration(2 * time.Hour), "2h"},
		{"duration mixed", FormatDuration(90 * time.Second), "1m30s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"2/s", "120/m", "0.5/s", "1000/h", "2", "fast", "0/s", "1e3/s", ".5/s", "5./h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if !(r > 0) || math.IsInf(r, 0) {
			t.Fatalf("ParseRate(%q) = %v, want finite > 0", s, r)
		}
		if back, err := ParseRate(Rate(r).String()); err != nil || math.Abs(back-r) > r*1e-5 {
			t.Fatalf("ParseRate(Rate(%v).String() = %q) = %v, %v", r, Rate(r).String(), back, err)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512B", "64KiB", "1MiB", "1GiB", "1048576", "1.5KiB", "1MB", "huge", "0.3KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, want >= 0", s, n)
		}
		if back, err := ParseSize(ByteSize(n).String()); err != nil || back != n {
			t.Fatalf("ParseSize(ByteSize(%d).String()) = %d, %v", n, back, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"10s", "1m30s", "2h", "0", "0.0", "10", "1.5h", "-1h", "9999999h", "300ms", " 5m ", "1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), "duration") {
				t.Fatalf("parseDuration(%q): error %q does not say what a duration looks like", s, err)
			}
			return
		}
		if back, err := parseDuration(FormatDuration(d)); err != nil || back != d {
			t.Fatalf("parseDuration(FormatDuration(%v) = %q) = %v, %v", d, FormatDuration(d), back, err)
		}
	})
}
