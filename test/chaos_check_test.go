package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// chaosCheck checks the run's ledger and deliveries against the bounds
// and logs the one-line summary.
func chaosCheck(t *testing.T, c *chaos, lg *chaosLedger, ds *downstream, seed uint64, accepted map[string]bool) {
	t.Helper()
	hits := ds.snapshot()
	byID := map[string][]hit{}
	for _, h := range hits {
		byID[h.body] = append(byID[h.body], h)
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// 0 accepted lost; every accepted job id (a first answer or a
	// duplicate's) is the job id of a delivery of that id.
	lost, badDup, noJobID, newJob := 0, 0, 0, 0
	dupReplies := 0
	replies := lg.snapshot()
	for id, rs := range replies {
		delivered := map[string]bool{}
		for _, h := range byID[id] {
			delivered[h.jobID] = true
		}
		if accepted[id] && len(byID[id]) == 0 {
			lost++
			if lost <= 5 {
				report("accepted id %s never delivered (replies %+v)", id, rs)
			}
		}
		jobIDs := map[string]bool{}
		for _, r := range rs {
			if r.status != "accepted" {
				continue
			}
			if r.jobID != "" {
				jobIDs[r.jobID] = true
			}
			if r.duplicate {
				dupReplies++
			}
			switch {
			case r.duplicate && r.jobID == "":
				noJobID++
				if noJobID <= 5 {
					report("id %s: a duplicate answer without a job id (deliveries %v)", id, jobIDsOf(byID[id]))
				}
			case !delivered[r.jobID] && len(byID[id]) > 0:
				badDup++
				if badDup <= 5 {
					report("id %s: answered accepted (duplicate %v) with job id %s, delivered as %v", id, r.duplicate, r.jobID, jobIDsOf(byID[id]))
				}
			}
		}
		if len(jobIDs) > 1 {
			newJob++ // the id was accepted as two jobs: dedupe missed a copy
		}
	}

	// Duplicate deliveries: same id delivered more than once.
	dups := 0
	for _, hs := range byID {
		dups += len(hs) - 1
	}
	_, faults := c.summary()
	dupFaults := c.counts[faultDaemonKill] + c.counts[faultDaemonStop] + c.counts[faultNATSKill] + c.counts[faultLeaderKill]
	dupBound := chaosDupPerFault * dupFaults
	if dups > dupBound {
		report("%d duplicate deliveries, bound %d (%d per fault × %d faults that can cause them)", dups, dupBound, chaosDupPerFault, dupFaults)
	}

	// Starts in any 1 s window.
	worst, worstAt := chaosWorstWindow(hits, time.Second)
	windowBound := int(chaosRate*1.1) + 1 + chaosPrefetch
	if worst > windowBound {
		report("%d starts in the 1 s from %s, bound %d (rate × 1.1 + 1 + prefetch %d): %s", worst, worstAt.Sub(c.t0).Round(time.Millisecond),
			windowBound, chaosPrefetch, chaosWindowStarts(hits, byID, worstAt, time.Second))
	}

	c.mu.Lock()
	longest, longestHealthy := time.Duration(0), time.Duration(0)
	for _, r := range c.restarts {
		longest = max(longest, r.took)
		if !r.natsFault {
			longestHealthy = max(longestHealthy, r.took)
		}
	}
	restarts := len(c.restarts)
	failures := append([]string(nil), c.failures...)
	log := append([]string(nil), c.log...)
	c.mu.Unlock()
	problems = append(problems, failures...)

	kinds, _ := c.summary()
	t.Logf("chaos: seed %d; %d faults (%s); %d ids sent (%d sends), %d accepted, %d duplicate answers, %d accepted as a second job; "+
		"%d deliveries, %d lost, %d duplicate deliveries (bound %d); worst 1 s window %d starts (bound %d); "+
		"%d restarts, longest %s (%s with no NATS fault under way; bounds %s, %s)",
		seed, faults, kinds, len(replies), lg.sends, len(accepted), dupReplies, newJob,
		len(hits), lost, dups, dupBound, worst, windowBound, restarts, longest.Round(time.Millisecond),
		longestHealthy.Round(time.Millisecond), chaosRestartBound, chaosRestartBoundNATS)
	if len(problems) > 0 || t.Failed() {
		t.Logf("fault log:\n%s", strings.Join(log, "\n"))
		t.Errorf("chaos seed %d:\n%s", seed, strings.Join(problems, "\n"))
	}
	if len(accepted) < 500 {
		t.Errorf("only %d ids accepted: the run did not put the daemons under load", len(accepted))
	}
}

func jobIDsOf(hs []hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.jobID)
	}
	return out
}

// chaosWindowStarts says who started the jobs of the window of length w
// from from: the starts of each daemon (by the admin address its sink
// names), and how many were a job's second or later delivery.
func chaosWindowStarts(hits []hit, byID map[string][]hit, from time.Time, w time.Duration) string {
	perDaemon, again := map[string]int{}, 0
	for _, h := range hits {
		if h.at.Before(from) || h.at.Sub(from) >= w {
			continue
		}
		perDaemon[h.header.Get("X-Chaos-Daemon")]++
		for _, earlier := range byID[h.body] {
			if earlier.at.Before(h.at) {
				again++
				break
			}
		}
	}
	return fmt.Sprintf("starts by daemon (admin address) %v, %d of them a job's delivery again", perDaemon, again)
}

// chaosWorstWindow returns the most starts in any window of length w
// (from a start on), and where it begins.
func chaosWorstWindow(hits []hit, w time.Duration) (int, time.Time) {
	at := make([]time.Time, len(hits))
	for i, h := range hits {
		at[i] = h.at
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	worst, from := 0, time.Time{}
	j := 0
	for i := range at {
		for j < len(at) && at[j].Sub(at[i]) < w {
			j++
		}
		if j-i > worst {
			worst, from = j-i, at[i]
		}
	}
	return worst, from
}
