package shaper

import (
	"errors"
	"io"
	"sync"

	"github.com/shaperd/shaper/shaper/service"
)

// serviceList is the shaper's background services in the order Run starts
// them. Run stops them in reverse once ctx is done, which is the shutdown
// in order: the scheduler stops starting jobs; intake closes and waits for
// the remote admission decisions in flight; in-flight deliveries finish
// within the grace; the jobs still queued are dead-lettered; the keeper
// saves the learned rates once more (after the last delivery's answer);
// the dead letters are flushed within the grace; the sinks and queues are
// closed.
func (s *Shaper) serviceList() []service.Service {
	list := []service.Service{&service.Funcs{StopFunc: s.retired.closeAll(s)}}
	if s.book != nil { // stopped after the dead letters, whose jobs it books, before the queues
		list = append(list, s.book)
	}
	list = append(list, s.dl)
	if s.keeper != nil {
		list = append(list, s.keeper)
	}
	return append(list,
		&service.Funcs{StopFunc: s.dropQueued},
		s.deliveries,
		s.remote,
		&service.Funcs{StopFunc: s.closeIntake},
		&service.Loop{Run: s.sched.Run},
	)
}

// closeIntake makes Submit answer unavailable from now on; the remote
// decisions in flight (stopped next) then refuse, or have queued their
// job before the queues are drained.
func (s *Shaper) closeIntake() error {
	s.mu.Lock()
	s.closing.Store(true) // under s.mu: Apply checks it under s.mu
	s.mu.Unlock()
	return nil
}

// dropQueued drops every job still queued with ReasonShutdown (a durable
// queue keeps its jobs: its Release gives none).
func (s *Shaper) dropQueued() error {
	dropped := 0
	for _, l := range s.allLanes() {
		l.mu.Lock()
		for _, job := range l.q.Release() {
			l.drop(job, ReasonShutdown, "daemon shutting down")
			dropped++
		}
		l.mu.Unlock()
	}
	s.log.Info("shaper stopped starting jobs", "queued_jobs_dead_lettered", dropped)
	return nil
}

// retired is the sinks of removed lanes and replaced sinks, closed when
// Run ends, and the closing of removed lanes' queues.
type retired struct {
	sinks   []Sink         // guarded by Shaper.mu
	closers sync.WaitGroup // queues of removed lanes being closed
}

// retire takes a removed lane that has finished out of the shaper: its
// sink is closed when Run ends, its metric series are deleted, and its
// queue is closed (a durable one hands fetched jobs back to the store).
// Requires s.mu.
func (s *Shaper) retire(l *lane) {
	delete(s.all, l)
	s.retired.sinks = append(s.retired.sinks, l.sink)
	s.met.Forget(l.name)
	q := l.q.Service
	if q == nil {
		return
	}
	s.retired.closers.Go(func() { // Stop waits for the queue's goroutines: not under s.mu
		if err := q.Stop(); err != nil {
			s.log.Warn("closing a removed downstream's queue failed", "downstream", l.name, "error", err.Error())
		}
	})
}

// closeAll returns the last service's Stop: it closes every sink that
// implements io.Closer and stops every lane's queue, once the queues of
// removed lanes are closed.
func (r *retired) closeAll(s *Shaper) func() error {
	return func() error {
		r.closers.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		sinks := r.sinks
		for l := range s.all {
			sinks = append(sinks, l.sink)
		}
		var errs []error
		for _, sk := range sinks {
			if c, ok := sk.(io.Closer); ok {
				errs = append(errs, c.Close())
			}
		}
		for l := range s.all {
			if l.q.Service != nil {
				errs = append(errs, l.q.Service.Stop())
			}
		}
		return errors.Join(errs...)
	}
}
