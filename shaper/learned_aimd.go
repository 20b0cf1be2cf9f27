package shaper

import "time"

// The adaptive controller's side of a kept rate (learner, learned.go), for
// the AIMD controller of adaptive.go. It learns no window. A kept rate
// primes it as the rate of its last cut at now, so that it probes gently
// around the kept rate instead of climbing fast from it, and answers to
// tries started before now do not cut again.

func (c *aimd) window() time.Duration { return 0 }

func (c *aimd) restore(v Learned, now time.Time) { *c = aimd{cut: now, peak: v.Rate} }
