package policy

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shaperd/shaper/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Unix(1000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// try is a try that took slot.
func try(slot time.Time) Try { return Try{Job: &queue.Job{Slot: slot}} }

func TestGateAnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Gate
		want Gate
	}{
		{"zero is no answer", Gate{}, Gate{}, Gate{}},
		{"later not-before wins", Gate{NotBefore: at(5)}, Gate{NotBefore: at(9)}, Gate{NotBefore: at(9)}},
		{"earlier not-before loses", Gate{NotBefore: at(9)}, Gate{NotBefore: at(5)}, Gate{NotBefore: at(9)}},
		{"lower rate wins", Gate{Rate: 10}, Gate{Rate: 4}, Gate{Rate: 4}},
		{"zero rate is no cap", Gate{Rate: 10}, Gate{}, Gate{Rate: 10}},
		{"cap over none", Gate{}, Gate{Rate: 3, Limit: 2}, Gate{Rate: 3, Limit: 2}},
		{"lower limit wins", Gate{Limit: 2}, Gate{Limit: 5}, Gate{Limit: 2}},
		{"any held holds", Gate{Held: true}, Gate{Rate: 1}, Gate{Held: true, Rate: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.And(tc.b); got != tc.want {
				t.Errorf("%+v.And(%+v) = %+v, want %+v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

// fixed is a policy that always answers g; quiet, it says it has nothing
// to say (whatever g is, so that a skipped Gate shows).
type fixed struct {
	g     Gate
	quiet bool
}

func (f fixed) Started(time.Time, Try)     {}
func (f fixed) Finished(time.Time, Answer) {}
func (f fixed) Gate(time.Time, int) Gate   { return f.g }
func (f fixed) Quiet(time.Time) bool       { return f.quiet }

func TestStrictest(t *testing.T) {
	ps := []Policy{fixed{g: Gate{NotBefore: at(3), Rate: 50}}, fixed{g: Gate{Rate: 20, Limit: 4}}, fixed{g: Gate{NotBefore: at(7)}},
		fixed{g: Gate{Held: true, Rate: 1}, quiet: true}}
	want := Gate{NotBefore: at(7), Rate: 20, Limit: 4}
	set := Compose(ps...)
	if got, _ := set.Gate(t0, 0, time.Time{}); got != want {
		t.Errorf("Set.Gate = %+v, want %+v (the quiet one skipped)", got, want)
	}
	var none Set
	if got, _ := none.Gate(t0, 0, time.Time{}); got != (Gate{}) {
		t.Errorf("Set.Gate of none = %+v, want the zero Gate", got)
	}
}

// TestQuiet steps each policy through states at fixed instants: where it
// says it is quiet for a lane whose last start took slot last, its Gate
// must answer nothing that binds (the zero Gate, or a NotBefore not after
// last), and where it binds, it must not be quiet.
func TestQuiet(t *testing.T) {
	var (
		pb    Pushback
		pause Paused
		brk   = Breaker{}
		quota Advertised
		ad    Adaptive
		kept  Kept
		maint Maintenance
	)
	brk.Configure(BreakerSettings{Failures: 1, OpenFor: time.Second, MaxOpenFor: time.Second})
	fail := Answer{Try: try(at(0)), Class: Failed}
	for _, tc := range []struct {
		name  string
		p     Policy
		step  func() // before the check
		now   time.Time
		last  time.Time
		quiet bool
	}{
		{"pushback: never paused", &pb, nil, at(0), time.Time{}, true},
		{"pushback: pausing", &pb, func() { pb.Finished(at(0), Answer{Class: PushedBack, RetryAfter: time.Second}) }, at(500), at(0), false},
		{"pushback: over, not started since", &pb, func() { pb.Gate(at(1000), 0) }, at(1000), at(0), false},
		{"pushback: started at its end", &pb, nil, at(1000), at(1000), true},
		{"paused: off", &pause, nil, at(0), time.Time{}, true},
		{"paused: until resumed", &pause, func() { pause.Pause(at(0), time.Time{}) }, at(0), at(0), false},
		{"paused: timed", &pause, func() { pause.Pause(at(0), at(200)) }, at(100), at(0), false},
		{"paused: over, not started since", &pause, func() { pause.Gate(at(200), 0) }, at(200), at(0), false},
		{"paused: started after its end", &pause, nil, at(300), at(250), true},
		{"breaker: closed, never opened", &brk, nil, at(0), time.Time{}, true},
		{"breaker: open", &brk, func() { brk.Finished(at(0), fail) }, at(10), at(0), false},
		{"breaker: probe in flight", &brk, func() { brk.Gate(at(1000), 0); brk.Started(at(1000), try(at(1000))) }, at(1000), at(1000), false},
		{"breaker: probe closed it, not started since", &brk, func() { brk.Finished(at(1100), Answer{Try: Try{Job: brk.st.probe}}) }, at(1100), at(1000), false},
		{"breaker: started after it closed", &brk, nil, at(1200), at(1150), true},
		{"quota: nothing advertised", &quota, nil, at(0), time.Time{}, true},
		{"quota: advertised", &quota, func() {
			quota.Finished(at(0), Answer{Try: try(at(0)), Quota: &Quota{Limit: 10, Window: time.Second, Remaining: 5, Reset: time.Second}})
		}, at(0), at(0), false},
		{"adaptive: off", &ad, func() { ad.Configure(AdaptiveSettings{Ceiling: 10, Concurrency: 1}) }, at(0), time.Time{}, true},
		{"adaptive: on", &ad, func() { ad.Configure(AdaptiveSettings{On: true, Ceiling: 10, Concurrency: 1}) }, at(0), time.Time{}, false},
		{"kept: no read", &kept, nil, at(0), time.Time{}, true},
		{"kept: takeover read", &kept, func() { kept.Asking(at(0)) }, at(0), time.Time{}, false},
		{"kept: answered", &kept, kept.Answered, at(0), time.Time{}, true},
		{"maintenance: no windows", &maint, nil, at(0), time.Time{}, true},
		{"maintenance: windows", &maint, func() {
			maint.Configure([]Window{{Days: [7]bool{true, true, true, true, true, true, true}, Length: time.Hour}})
		}, at(0), at(0), false},
	} {
		if tc.step != nil {
			tc.step()
		}
		quiet := tc.p.Quiet(tc.last)
		if quiet != tc.quiet {
			t.Errorf("%s: Quiet(%v) = %v, want %v", tc.name, tc.last, quiet, tc.quiet)
		}
		if !quiet {
			continue
		}
		if g := tc.p.Gate(tc.now, 0); g.Held || g.Rate != 0 || g.Limit != 0 || g.NotBefore.After(tc.last) {
			t.Errorf("%s: quiet, but Gate = %+v binds a lane last started at %v", tc.name, g, tc.last)
		}
	}
}
