package policy

import (
	"testing"
	"time"
)

// TestComposeRoles: Compose finds the roles each of the lane's policies
// plays, and no other (a role a policy plays has something to do in it).
func TestComposeRoles(t *testing.T) {
	var (
		quota Advertised
		ad    Adaptive
		brk   Breaker
		pb    Pushback
		pause Paused
		kept  Kept
		maint Maintenance
	)
	s := Compose(&quota, &ad, &brk, &pb, &pause, &kept, &maint)
	for _, tc := range []struct {
		role string
		n    int
		want int
	}{
		{"Starter", len(s.starters), 3},
		{"Finisher", len(s.finishers), 4},
		{"Holder", len(s.holders), 1},
		{"Forecaster", len(s.forecasters), 2},
		{"Waker", len(s.wakers), 1},
		{"Describer", len(s.describers), 5},
	} {
		if tc.n != tc.want {
			t.Errorf("%d %ss, want %d", tc.n, tc.role, tc.want)
		}
	}
	marks := 0
	for _, m := range s.all {
		if m.mark != nil {
			marks++
		}
	}
	if marks != 3 {
		t.Errorf("%d Markers, want 3", marks)
	}
}

// TestSetHold: a used-up quota's pause goes to the Pushback, and is
// reported only when it paused: a longer pause already running absorbs it.
func TestSetHold(t *testing.T) {
	var quota Advertised
	var pb Pushback
	s := Compose(&quota, &pb)
	evs := s.Finished(at(0), Answer{Try: try(at(0)), Class: PushedBack, RetryAfter: 5 * time.Second})
	if !evs.Has(PushbackPaused) || !evs.At(PushbackPaused).Equal(at(5000)) {
		t.Fatalf("pushback: events %+v, want paused until %v", evs, at(5000))
	}
	used := Answer{Try: try(at(100)), Quota: &Quota{Limit: 10, Remaining: 0, Reset: 2 * time.Second}}
	if evs := s.Finished(at(100), used); len(evs) != 0 {
		t.Errorf("quota used up inside a longer pause: events %+v, want none", evs)
	}
	used = Answer{Try: try(at(3000)), Quota: &Quota{Limit: 10, Remaining: 0, Reset: 8 * time.Second}}
	if evs := s.Finished(at(3000), used); !evs.Has(QuotaPaused) || !pb.Until().Equal(at(11000)) {
		t.Errorf("quota used up past the pause: events %+v, paused until %v; want QuotaPaused until %v", evs, pb.Until(), at(11000))
	}
}

// TestSetForecast: the Forecasters' holds on the way are waited out, and
// a pause until resumed schedules nothing.
func TestSetForecast(t *testing.T) {
	var pause Paused
	var maint Maintenance
	s := Compose(&pause, &maint)
	if got, ok := s.Forecast(at(0), time.Second); !ok || !got.Equal(at(1000)) {
		t.Errorf("no holds: %v %v, want %v", got, ok, at(1000))
	}
	pause.Pause(at(0), at(2000))
	if got, ok := s.Forecast(at(0), time.Second); !ok || !got.Equal(at(3000)) {
		t.Errorf("timed pause: %v %v, want its end plus the span (%v)", got, ok, at(3000))
	}
	pause.Pause(at(0), time.Time{})
	if _, ok := s.Forecast(at(0), time.Second); ok {
		t.Error("paused until resumed: a start forecast, want none")
	}
	pause.Resume()
	noon := time.Date(2025, 1, 6, 12, 0, 0, 0, time.UTC)
	maint.Configure([]Window{{Days: [7]bool{true, true, true, true, true, true, true}, Hour: 12, Minute: 30, Length: time.Hour}})
	if got, ok := s.Forecast(noon, time.Hour); !ok || !got.Equal(noon.Add(2*time.Hour)) {
		t.Errorf("across a window: %v %v, want %v", got, ok, noon.Add(2*time.Hour))
	}
	if got := s.NextChange(noon); !got.Equal(noon.Add(30 * time.Minute)) {
		t.Errorf("NextChange = %v, want the window's start", got)
	}
}
