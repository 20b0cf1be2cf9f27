package policy

import (
	"testing"

	"github.com/shaperd/shaper/queue"
)

// TestKeyFlightReload: a cap set while tries are in flight counts the
// tries started from then on; the earlier ones end without effect, and
// lifting the cap forgets every count.
func TestKeyFlightReload(t *testing.T) {
	var k KeyFlight
	a := &queue.Job{Key: "a"}
	k.Started(a) // no cap: not counted
	k.SetMax(1)
	if !k.MayStart("a") {
		t.Fatal("a try started before the cap counts against it")
	}
	if k.Finished(a) {
		t.Error("the uncounted try ended at the cap")
	}
	k.Started(a)
	if k.MayStart("a") || !k.MayStart("b") {
		t.Fatal("a at its cap of 1: a may not start, b may")
	}
	k.SetMax(2)
	if !k.MayStart("a") {
		t.Fatal("a raised cap of 2 lets a second try of a start")
	}
	if k.Finished(a) || len(k.n) != 0 { // 1 of 2 in flight: not at the cap
		t.Errorf("after a's try ended under a cap of 2: at cap, counts %v", k.n)
	}
	k.Started(a)
	k.SetMax(0)
	if k.Finished(a) || len(k.n) != 0 {
		t.Errorf("after the cap was lifted: counts %v", k.n)
	}
}
