package shaper

import (
	"testing"
	"testing/synctest"
	"time"
)

// scraped is the value of family name's series of downstream (with
// outcome, for the delivered counter) as a scrape of h.reg reads it; ok
// is false when there is none.
func (h *harness) scraped(name, downstream, outcome string) (v float64, ok bool) {
	h.t.Helper()
	fams, err := h.reg.Gather()
	if err != nil {
		h.t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if (lp.GetName() == "downstream" && lp.GetValue() != downstream) ||
					(lp.GetName() == "outcome" && lp.GetValue() != outcome) {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestScrapedSeriesFollowTheLane: the started, success, depth and
// in-flight series a scrape reads are the lane's own counts; a lane
// removed and added again while it drains is the same lane, and its
// counters carry on; once it has drained and gone, its series go, and a
// lane added again under the name counts from zero.
func TestScrapedSeriesFollowTheLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		both := Settings{Lanes: []LaneSettings{laneCfg("a", 2, 10), laneCfg("keep", 1, 1)}}
		keep := Settings{Lanes: []LaneSettings{laneCfg("keep", 1, 1)}}
		h := start(t, both, map[string]Sink{"a": newRecSink(nil), "keep": newRecSink(nil)})
		defer h.stop()
		want := func(when string, started, success, depth float64) {
			t.Helper()
			for _, c := range []struct {
				name, outcome string
				want          float64
			}{
				{"shaper_jobs_started_total", "", started},
				{"shaper_jobs_delivered_total", "success", success},
				{"shaper_queue_depth", "", depth},
				{"shaper_inflight", "", 0},
			} {
				if got, ok := h.scraped(c.name, "a", c.outcome); !ok || got != c.want {
					t.Errorf("%s: %s = %v (present %v), want %v", when, c.name, got, ok, c.want)
				}
			}
		}
		h.submit("a", 4)
		time.Sleep(600 * time.Millisecond) // starts at 0 and 0.5 s
		synctest.Wait()
		want("two started", 2, 2, 2)
		if err := h.sh.Apply(keep); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // draining, not yet drained
		if err := h.sh.Apply(both); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		want("added again while draining", 4, 4, 0)
		if st := h.status("a"); st.Started != 4 {
			t.Errorf("status: started %d, want 4", st.Started)
		}
		if err := h.sh.Apply(keep); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, ok := h.scraped("shaper_jobs_started_total", "a", ""); ok {
			t.Error("a drained lane's started series is still exported")
		}
		if err := h.sh.Apply(both); err != nil {
			t.Fatal(err)
		}
		h.submit("a", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		want("added again after it had gone", 1, 1, 0)
	})
}
