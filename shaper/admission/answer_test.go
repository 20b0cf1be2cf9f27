package admission

import (
	"testing"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// TestAskChargesOnlyWhatItAdmits: a nil rule admits and charges nothing;
// a refused job charges nothing; an admitted one's Charge gives its token
// back.
func TestAskChargesOnlyWhatItAdmits(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	if a := Ask(nil, "k", t0, 1); !a.Allowed || !a.Charge().IsZero() {
		t.Fatalf("no rule: %+v, charge %+v; want admitted, nothing charged", a.Decision, a.Charge())
	}
	adm, err := New(Settings{Lane: "a", Limits: []limiter.Config{
		{Mode: limiter.FixedWindowMode, Limit: 1, Window: time.Minute},
	}}, nil, Counters{})
	if err != nil {
		t.Fatal(err)
	}
	first := Ask(adm, "k", t0, 1)
	if !first.Allowed || first.Charge().IsZero() || first.Charge().Blocks() {
		t.Fatalf("first job: %+v; want admitted with a charge that does no I/O", first.Decision)
	}
	second := Ask(adm, "k", t0, 1)
	if second.Allowed || !second.Charge().IsZero() {
		t.Fatalf("second job in a window of 1: %+v, charge %+v; want refused, nothing charged", second.Decision, second.Charge())
	}
	first.Charge().Refund()
	if again := Ask(adm, "k", t0, 1); !again.Allowed {
		t.Fatalf("after the refund: %+v, want admitted", again.Decision)
	}
}
