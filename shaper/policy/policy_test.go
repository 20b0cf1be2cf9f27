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

// fixed is a policy that always answers g.
type fixed struct{ g Gate }

func (f fixed) Started(time.Time, Try)     {}
func (f fixed) Finished(time.Time, Answer) {}
func (f fixed) Gate(time.Time, int) Gate   { return f.g }

func TestStrictest(t *testing.T) {
	ps := []Policy{fixed{Gate{NotBefore: at(3), Rate: 50}}, fixed{Gate{Rate: 20, Limit: 4}}, fixed{Gate{NotBefore: at(7)}}}
	want := Gate{NotBefore: at(7), Rate: 20, Limit: 4}
	if got := Strictest(t0, 0, ps); got != want {
		t.Errorf("Strictest = %+v, want %+v", got, want)
	}
	if got := Strictest(t0, 0, nil); got != (Gate{}) {
		t.Errorf("Strictest of none = %+v, want the zero Gate", got)
	}
}
