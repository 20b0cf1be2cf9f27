package policy

import (
	"testing"
	"time"
)

func days(ds ...time.Weekday) (out [7]bool) {
	for _, d := range ds {
		out[d] = true
	}
	return out
}

// TestMaintenance: a window holds starts for its length, at its local time
// on its days only; the schedule's floor is its end; Next and NextChange
// name the window to come.
func TestMaintenance(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone data: %v", err) // time/tzdata is linked into the binaries
	}
	var m Maintenance
	m.Configure([]Window{
		{Days: days(time.Saturday, time.Sunday), Hour: 2, Length: 2 * time.Hour, Loc: berlin},
		{Days: days(time.Wednesday), Hour: 23, Minute: 30, Length: time.Hour}, // UTC, across midnight
	})
	// 2025-01-04 is a Saturday; Berlin is UTC+1 in January.
	sat := func(h, mi int) time.Time { return time.Date(2025, 1, 4, h, mi, 0, 0, time.UTC) }
	wed := func(d, h, mi int) time.Time { return time.Date(2025, 1, d, h, mi, 0, 0, time.UTC) }
	satEnd := sat(3, 0) // 04:00 Berlin
	for _, tc := range []struct {
		name   string
		now    time.Time
		in     bool
		want   Gate
		change time.Time
	}{
		{"friday night, before", sat(0, 30), false, Gate{}, sat(1, 0)},
		{"saturday 02:00 Berlin is 01:00 UTC", sat(1, 0), true, Gate{NotBefore: satEnd}, satEnd},
		{"inside", sat(2, 59), true, Gate{NotBefore: satEnd}, satEnd},
		{"at its end it is over; the end is the floor", satEnd, false, Gate{NotBefore: satEnd}, time.Date(2025, 1, 5, 1, 0, 0, 0, time.UTC)},
		{"wednesday 23:30 UTC", wed(8, 23, 45), true, Gate{NotBefore: wed(9, 0, 30)}, wed(9, 0, 30)},
		{"past midnight, still the wednesday window", wed(9, 0, 15), true, Gate{NotBefore: wed(9, 0, 30)}, wed(9, 0, 30)},
		{"thursday 23:30 is no window", wed(9, 23, 45), false, Gate{NotBefore: wed(9, 0, 30)}, time.Date(2025, 1, 11, 1, 0, 0, 0, time.UTC)},
	} {
		_, in := m.Current(tc.now)
		if in != tc.in {
			t.Fatalf("%s: Current = %v, want %v", tc.name, in, tc.in)
		}
		if g := m.Gate(tc.now, 0); g != tc.want && !(tc.want == Gate{} && g.NotBefore.Before(tc.now)) {
			t.Fatalf("%s: Gate = %+v, want %+v", tc.name, g, tc.want)
		}
		if c := m.NextChange(tc.now); !c.Equal(tc.change) {
			t.Fatalf("%s: NextChange = %v, want %v", tc.name, c, tc.change)
		}
	}
}

// TestMaintenanceShift: work that would run into a window is held over it.
func TestMaintenanceShift(t *testing.T) {
	var m Maintenance
	every := days(0, 1, 2, 3, 4, 5, 6)
	m.Configure([]Window{{Days: every, Hour: 12, Length: time.Hour}})
	noon := func(mi int) time.Time {
		return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(mi) * time.Minute)
	}
	for _, tc := range []struct {
		name string
		t    time.Time
		d    time.Duration
		want time.Time
	}{
		{"done before the window", noon(-30), 10 * time.Minute, noon(-20)},
		{"runs into it: held over", noon(-30), 40 * time.Minute, noon(70)},
		{"starting inside: after it", noon(30), 5 * time.Minute, noon(65)},
		{"over three windows", noon(-30), 47 * time.Hour, noon(2*24*60 + 90)},
	} {
		if got := m.Shift(tc.t, tc.d); !got.Equal(tc.want) {
			t.Errorf("%s: Shift = %v, want %v", tc.name, got, tc.want)
		}
	}
	var none Maintenance
	if got := none.Shift(noon(0), time.Minute); !got.Equal(noon(1)) {
		t.Errorf("no windows: Shift = %v", got)
	}
	if _, ok := none.Next(noon(0)); ok {
		t.Error("no windows: Next found one")
	}
}

// TestMaintenanceMerged: overlapping windows make one span.
func TestMaintenanceMerged(t *testing.T) {
	var m Maintenance
	every := days(0, 1, 2, 3, 4, 5, 6)
	m.Configure([]Window{{Days: every, Hour: 1, Length: time.Hour}, {Days: every, Hour: 1, Minute: 30, Length: time.Hour}})
	now := time.Date(2025, 3, 3, 1, 10, 0, 0, time.UTC)
	s, ok := m.Current(now)
	if !ok || !s.End.Equal(time.Date(2025, 3, 3, 2, 30, 0, 0, time.UTC)) {
		t.Fatalf("Current = %+v, %v; want one span to 02:30", s, ok)
	}
}
