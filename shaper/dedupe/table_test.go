package dedupe

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
)

// newTable is a table of receipts, as intake keeps.
func newTable(window time.Duration, maxIDs int) *Table[shaper.Receipt] {
	return New(Settings{Window: window, MaxIDs: maxIDs}, func(rc shaper.Receipt) (string, bool) { return rc.JobID, rc.Accepted })
}

// accept claims id and settles it as accepted with job, as intake does.
func accept(d *Table[shaper.Receipt], now time.Time, id, job string) {
	if _, c := d.Claim(now, id, nil); c == First {
		d.Settle(now, id, shaper.Receipt{Accepted: true, JobID: job})
	}
}

// lookup is claim for an id already settled: its job id, if accepted.
func lookup(d *Table[shaper.Receipt], now time.Time, id string) (string, bool) {
	jobID, c := d.Claim(now, id, nil)
	if c == First {
		d.Settle(now, id, shaper.Receipt{}) // a rejection: nothing remembered
	}
	return jobID, c == Duplicate
}

// TestDedupeClaim: copies of an id on its way wait for the first copy's
// answer and share it; an id whose first copy was rejected is not
// remembered, so the next copy goes through.
func TestDedupeClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newTable(2*time.Minute, 100)
	if _, c := d.Claim(t0, "a", nil); c != First {
		t.Fatalf("first claim = %v, want First", c)
	}
	var got []shaper.Receipt
	for range 3 {
		if _, c := d.Claim(t0, "a", func(rc shaper.Receipt) { got = append(got, rc) }); c != Waiting {
			t.Fatalf("copy's claim = %v, want Waiting", c)
		}
	}
	rejected := shaper.Receipt{Reason: shaper.ReasonQueueFull, RetryAfter: time.Second}
	d.Settle(t0, "a", rejected)
	if len(got) != 3 || got[0] != rejected || d.waiting != 0 {
		t.Fatalf("copies got %+v (waiting %d), want the first copy's rejection 3 times", got, d.waiting)
	}
	if _, c := d.Claim(t0, "a", nil); c != First {
		t.Fatalf("claim after a rejection = %v, want First", c)
	}
	got = nil
	d.Claim(t0, "a", func(rc shaper.Receipt) { got = append(got, rc) })
	d.Settle(t0, "a", shaper.Receipt{Accepted: true, JobID: "job-a"})
	if len(got) != 1 || got[0].JobID != "job-a" {
		t.Fatalf("copy got %+v, want the accepted job-a", got)
	}
	if id, c := d.Claim(t0.Add(time.Minute), "a", nil); c != Duplicate || id != "job-a" {
		t.Fatalf("claim after acceptance = %q %v, want job-a Duplicate", id, c)
	}
}

// TestDedupeWaitingBounded: past MaxWaiting copies a copy is refused.
func TestDedupeWaitingBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newTable(time.Minute, 10)
	d.Claim(t0, "a", nil)
	for range MaxWaiting {
		d.Claim(t0, "a", func(shaper.Receipt) {})
	}
	if _, c := d.Claim(t0, "a", func(shaper.Receipt) {}); c != Busy {
		t.Fatalf("claim past MaxWaiting = %v, want Busy", c)
	}
	d.Settle(t0, "a", shaper.Receipt{})
	if d.waiting != 0 || len(d.pending) != 0 {
		t.Fatalf("after settle: waiting %d, pending %d", d.waiting, len(d.pending))
	}
}

func TestDedupeWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newTable(2*time.Minute, 100)
	accept(d, t0, "a", "job-a")
	if id, ok := lookup(d, t0.Add(time.Minute), "a"); !ok || id != "job-a" {
		t.Fatalf("lookup within window = %q, %v", id, ok)
	}
	accept(d, t0.Add(time.Minute), "a", "job-other") // a repeat does not replace the first
	if id, _ := lookup(d, t0.Add(90*time.Second), "a"); id != "job-a" {
		t.Errorf("first job id replaced: %q", id)
	}
	if _, ok := lookup(d, t0.Add(2*time.Minute), "a"); ok {
		t.Error("id still remembered when its window ended")
	}
	if d.len() != 0 {
		t.Errorf("%d ids held after expiry", d.len())
	}
}

func TestDedupeCapEvictsOldest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newTable(time.Hour, 3)
	hooked := 0
	d.onEvict = func() { hooked++ }
	for i := range 5 {
		accept(d, t0, fmt.Sprint(i), fmt.Sprint("job-", i))
	}
	if d.len() != 3 || d.evicted != 2 || hooked != 2 {
		t.Fatalf("len %d evicted %d (OnEvict called %d times), want 3 and 2 (2)", d.len(), d.evicted, hooked)
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := lookup(d, t0, fmt.Sprint(i)); ok != want {
			t.Errorf("id %d remembered = %v, want %v", i, ok, want)
		}
	}
}

// Memory follows live ids: a long run of expiring ids keeps the FIFO compact.
func TestDedupeCompacts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newTable(time.Second, 1<<20)
	for i := range 100000 {
		accept(d, t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprint(i), "j")
	}
	if d.len() > 1001 || len(d.order)-d.head > 1001 || cap(d.order) > 8192 {
		t.Errorf("len %d, fifo %d (head %d, cap %d): expired ids not released", d.len(), len(d.order), d.head, cap(d.order))
	}
}

func TestDedupeZeroWindowRemembersNothing(t *testing.T) {
	d := newTable(0, 10)
	accept(d, time.Now(), "a", "j")
	if d.len() != 0 {
		t.Error("window 0 should disable dedupe")
	}
}

// len returns the number of ids held.
func (d *Table[A]) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byID)
}
