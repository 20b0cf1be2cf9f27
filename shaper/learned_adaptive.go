package shaper

import "time"

// The adaptive controller's side of a kept rate (learner, learned.go). It
// keeps what it learned of the downstream's memory (from Retry-After or a
// refusal run), and a kept value primes it as if the rate had just been
// cut to v.Rate at now: that is the last good rate to probe gently around,
// and answers to tries started before now are echoes that cut nothing.

// learnedMemory is the downstream's memory the controller learned; 0
// while it still uses the default.
func (c *adaptive) learnedMemory() time.Duration { return c.memory }

// restore primes the controller with a kept value at now.
func (c *adaptive) restore(v Learned, now time.Time) {
	*c = adaptive{good: v.Rate, cut: now, quiet: now, judge: now, memory: v.Window}
}
