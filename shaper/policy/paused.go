package policy

import "time"

// Paused is a pause set by an operator (the admin API's pause and resume):
// while On it holds every start; it ends only when turned off. Its zero
// value is not paused. The lane restarts its schedule from the moment of
// the resume (no burst for the time paused) and exports an effective rate
// of 0 while On.
type Paused struct {
	On bool
}

// Started does nothing: a pause does not follow the lane's tries.
func (p *Paused) Started(time.Time, Try) {}

// Finished does nothing.
func (p *Paused) Finished(time.Time, Answer) {}

// Gate holds every start while the pause is on.
func (p *Paused) Gate(time.Time, int) Gate { return Gate{Held: p.On} }
