package predict

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const iv = 100 * time.Millisecond

func TestSlotFreesIn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nextFree time.Time
		want     time.Duration
	}{
		{"next start ahead", t0.Add(250 * time.Millisecond), 250 * time.Millisecond},
		{"next start due now: one interval", t0, iv},
		{"next start overdue: one interval", t0.Add(-time.Second), iv},
		{"held by a pushback until later", t0.Add(3 * time.Second), 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SlotFreesIn(t0, tc.nextFree, iv); got != tc.want {
				t.Errorf("SlotFreesIn = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLevelFreesIn(t *testing.T) {
	for _, tc := range []struct {
		name         string
		need, held   int
		first        time.Duration
		nextFree     time.Time
		want         time.Duration
		asksNextFree bool
	}{
		{name: "first held slot covers it", need: 1, held: 3, first: 40 * time.Millisecond,
			want: 40 * time.Millisecond},
		{name: "need 0 counts as 1", need: 0, held: 2, first: 40 * time.Millisecond,
			want: 40 * time.Millisecond},
		{name: "third held slot", need: 3, held: 3, first: 40 * time.Millisecond,
			want: 240 * time.Millisecond},
		{name: "past the held slots: from the next start", need: 4, held: 2, first: 40 * time.Millisecond,
			nextFree: t0.Add(500 * time.Millisecond), want: 500*time.Millisecond + 2*iv, asksNextFree: true},
		{name: "next start before the held slots drain", need: 3, held: 2, first: 40 * time.Millisecond,
			nextFree: t0.Add(10 * time.Millisecond), want: 140*time.Millisecond + iv, asksNextFree: true},
		{name: "nothing held, next start overdue", need: 2, nextFree: t0.Add(-time.Second),
			want: 2 * iv, asksNextFree: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := false
			got := LevelFreesIn(t0, tc.need, tc.held, tc.first, iv, func() time.Time { asked = true; return tc.nextFree })
			if got != tc.want {
				t.Errorf("LevelFreesIn = %s, want %s", got, tc.want)
			}
			if asked != tc.asksNextFree {
				t.Errorf("next free start asked: %v, want %v", asked, tc.asksNextFree)
			}
		})
	}
}

func TestStartFreesIn(t *testing.T) {
	for _, tc := range []struct {
		slot time.Duration
		need int
		want time.Duration
	}{
		{0, 5, 0}, // unknown stays unknown
		{30 * time.Millisecond, 1, 30 * time.Millisecond},
		{30 * time.Millisecond, 0, 30 * time.Millisecond},
		{30 * time.Millisecond, 4, 30*time.Millisecond + 3*iv},
	} {
		if got := StartFreesIn(tc.slot, tc.need, iv); got != tc.want {
			t.Errorf("StartFreesIn(%s, %d) = %s, want %s", tc.slot, tc.need, got, tc.want)
		}
	}
}

func TestLate(t *testing.T) {
	margin := 20 * time.Millisecond
	for _, tc := range []struct {
		name         string
		start, ready time.Time
		wait, want   time.Duration
	}{
		{"starts well within its wait", t0.Add(time.Second), t0, 5 * time.Second, -4*time.Second + margin},
		{"within the margin of its deadline: late", t0.Add(4990 * time.Millisecond), t0, 5 * time.Second, 10 * time.Millisecond},
		{"past its wait", t0.Add(7 * time.Second), t0, 5 * time.Second, 2*time.Second + margin},
		{"a delayed job counts from its instant", t0.Add(time.Second), t0.Add(3 * time.Second), time.Second, margin - time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Late(tc.start, tc.ready, tc.wait, margin); got != tc.want {
				t.Errorf("Late = %s, want %s", got, tc.want)
			}
		})
	}
}
