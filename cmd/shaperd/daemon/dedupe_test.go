package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
)

// accept claims id and settles it as accepted with job, as intake does.
func accept(d *dedupe, now time.Time, id, job string) {
	if _, c := d.claim(now, id, nil); c == claimFirst {
		d.settle(now, id, shaper.Receipt{Accepted: true, JobID: job})
	}
}

// lookup is claim for an id already settled: its job id, if accepted.
func lookup(d *dedupe, now time.Time, id string) (string, bool) {
	jobID, c := d.claim(now, id, nil)
	if c == claimFirst {
		d.settle(now, id, shaper.Receipt{}) // a rejection: nothing remembered
	}
	return jobID, c == claimDuplicate
}

// TestDedupeClaim: copies of an id on its way wait for the first copy's
// answer and share it; an id whose first copy was rejected is not
// remembered, so the next copy goes through.
func TestDedupeClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newDedupe(2*time.Minute, 100)
	if _, c := d.claim(t0, "a", nil); c != claimFirst {
		t.Fatalf("first claim = %v, want claimFirst", c)
	}
	var got []shaper.Receipt
	for range 3 {
		if _, c := d.claim(t0, "a", func(rc shaper.Receipt) { got = append(got, rc) }); c != claimWaiting {
			t.Fatalf("copy's claim = %v, want claimWaiting", c)
		}
	}
	rejected := shaper.Receipt{Reason: shaper.ReasonQueueFull, RetryAfter: time.Second}
	d.settle(t0, "a", rejected)
	if len(got) != 3 || got[0] != rejected || d.waiting != 0 {
		t.Fatalf("copies got %+v (waiting %d), want the first copy's rejection 3 times", got, d.waiting)
	}
	if _, c := d.claim(t0, "a", nil); c != claimFirst {
		t.Fatalf("claim after a rejection = %v, want claimFirst", c)
	}
	got = nil
	d.claim(t0, "a", func(rc shaper.Receipt) { got = append(got, rc) })
	d.settle(t0, "a", shaper.Receipt{Accepted: true, JobID: "job-a"})
	if len(got) != 1 || got[0].JobID != "job-a" {
		t.Fatalf("copy got %+v, want the accepted job-a", got)
	}
	if id, c := d.claim(t0.Add(time.Minute), "a", nil); c != claimDuplicate || id != "job-a" {
		t.Fatalf("claim after acceptance = %q %v, want job-a claimDuplicate", id, c)
	}
}

// TestDedupeWaitingBounded: past maxWaiting copies a copy is refused.
func TestDedupeWaitingBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newDedupe(time.Minute, 10)
	d.claim(t0, "a", nil)
	for range maxWaiting {
		d.claim(t0, "a", func(shaper.Receipt) {})
	}
	if _, c := d.claim(t0, "a", func(shaper.Receipt) {}); c != claimBusy {
		t.Fatalf("claim past maxWaiting = %v, want claimBusy", c)
	}
	d.settle(t0, "a", shaper.Receipt{})
	if d.waiting != 0 || len(d.pending) != 0 {
		t.Fatalf("after settle: waiting %d, pending %d", d.waiting, len(d.pending))
	}
}

func TestDedupeWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := newDedupe(2*time.Minute, 100)
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
	d := newDedupe(time.Hour, 3)
	for i := range 5 {
		accept(d, t0, fmt.Sprint(i), fmt.Sprint("job-", i))
	}
	if d.len() != 3 || d.evicted != 2 {
		t.Fatalf("len %d evicted %d, want 3 and 2", d.len(), d.evicted)
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
	d := newDedupe(time.Second, 1<<20)
	for i := range 100000 {
		accept(d, t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprint(i), "j")
	}
	if d.len() > 1001 || len(d.order)-d.head > 1001 || cap(d.order) > 8192 {
		t.Errorf("len %d, fifo %d (head %d, cap %d): expired ids not released", d.len(), len(d.order), d.head, cap(d.order))
	}
}

func TestDedupeZeroWindowRemembersNothing(t *testing.T) {
	d := newDedupe(0, 10)
	accept(d, time.Now(), "a", "j")
	if d.len() != 0 {
		t.Error("window 0 should disable dedupe")
	}
}

// len returns the number of ids held.
func (d *dedupe) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byID)
}
