package jetstream

import "sync"

// order runs the steps of a queue's stores in the order they were offered,
// each once it is ready: a job whose Nats-Msg-Id is being looked up holds
// back the jobs offered after it, so a producer's jobs are stored in the
// order it sent them. The zero value is empty; safe for concurrent use.
type order struct {
	mu      sync.Mutex
	steps   []*step // oldest first
	running bool    // a goroutine is running ready steps
}

// step is one store's turn: run, once ready.
type step struct {
	ready bool
	run   func()
}

// add appends a step; a ready one (run set) runs once those before it ran.
// It runs ready steps from the front on the caller's goroutine unless
// another goroutine is already doing so.
func (o *order) add(run func()) *step {
	s := &step{ready: run != nil, run: run}
	o.mu.Lock()
	o.steps = append(o.steps, s)
	o.mu.Unlock()
	o.pump()
	return s
}

// idle reports whether no step waits or runs: a store may then go ahead
// without a step of its own.
func (o *order) idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.steps) == 0 && !o.running
}

// ready makes s ready to run.
func (o *order) ready(s *step, run func()) {
	o.mu.Lock()
	s.run, s.ready = run, true
	o.mu.Unlock()
	o.pump()
}

// pump runs ready steps from the front until the front is not ready. A
// step made ready while another goroutine pumps is run by that goroutine,
// which checks the front again under o.mu before it stops.
func (o *order) pump() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running {
		return
	}
	o.running = true
	for len(o.steps) > 0 && o.steps[0].ready {
		s := o.steps[0]
		o.steps[0] = nil
		o.steps = o.steps[1:]
		o.mu.Unlock()
		s.run()
		o.mu.Lock()
	}
	o.running = false
}
