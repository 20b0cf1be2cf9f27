// Package service is the one shape of every background worker in shaperd
// (the shaper's scheduler, deliveries and dead-letter worker, the keeper of
// learned rates, a durable queue, the dedupe records' watch, replays,
// runtime control, the status page's history, the daemon's NATS connection
// and admin server): Start, then an idempotent Stop that waits for what
// Start began. A List starts services in order and stops them in the
// reverse order, so a service may rely on every one started before it
// until it has stopped.
package service

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A Service is a background worker with a lifetime: what Start begins
// runs until Stop, whatever becomes of Start's context.
type Service interface {
	// Start begins the service's work and returns once it is running, or
	// the error that kept it from starting (it then holds nothing). ctx
	// bounds the start only; it is not the service's lifetime.
	Start(ctx context.Context) error
	// Stop ends the work Start began and waits for its goroutines. It is
	// idempotent, and safe on a service that never started.
	Stop() error
}

// List is services started in order and stopped in reverse (LIFO). The
// zero value is ready to use; it is safe for concurrent use.
type List struct {
	mu      sync.Mutex
	started []Service
	stopped bool
}

// Start starts each of svcs in turn and adds it to the list. On the first
// error it stops nothing (Stop does that) and returns the error; the
// services after it are not started. Start after Stop starts nothing and
// returns ErrStopped.
func (l *List) Start(ctx context.Context, svcs ...Service) error {
	for _, s := range svcs {
		l.mu.Lock()
		stopped := l.stopped
		l.mu.Unlock()
		if stopped {
			return ErrStopped
		}
		if err := s.Start(ctx); err != nil {
			return err
		}
		l.mu.Lock()
		l.started = append(l.started, s)
		l.mu.Unlock()
	}
	return nil
}

// Stop stops every started service, the last started first, and returns
// their errors joined. It is idempotent.
func (l *List) Stop() error {
	l.mu.Lock()
	started := l.started
	l.started, l.stopped = nil, true
	l.mu.Unlock()
	var errs []error
	for i := len(started) - 1; i >= 0; i-- {
		errs = append(errs, started[i].Stop())
	}
	return errors.Join(errs...)
}

// Funcs is a Service made of two functions; either may be nil. Stop calls
// StopFunc once, and only after a successful Start.
type Funcs struct {
	StartFunc func(ctx context.Context) error
	StopFunc  func() error

	mu      sync.Mutex
	started bool
}

// Start calls StartFunc.
func (f *Funcs) Start(ctx context.Context) error {
	if f.StartFunc != nil {
		if err := f.StartFunc(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.started = true
	f.mu.Unlock()
	return nil
}

// Stop calls StopFunc, once.
func (f *Funcs) Stop() error {
	f.mu.Lock()
	stop := f.StopFunc
	if !f.started {
		stop = nil
	}
	f.started, f.StopFunc = false, nil
	f.mu.Unlock()
	if stop == nil {
		return nil
	}
	return stop()
}

// Loop is a Service that runs Run on a goroutine of its own from Start
// until Stop, which cancels Run's context and waits for it to return.
// Run's context carries the values of Start's, not its cancellation.
type Loop struct {
	Run func(ctx context.Context)

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	stopped bool
}

// Start starts Run.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.stopped:
		return ErrStopped
	case l.done != nil:
		return ErrStarted
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		l.Run(ctx)
	}()
	return nil
}

// Stop cancels Run's context and waits for Run to return.
func (l *Loop) Stop() error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.stopped = true
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

// WaitGrace waits for done, at most grace; if that passes first it calls
// late (which should make done close: a cancel, or only a log line) and
// goes on waiting. It is how a Stop gives its work a shutdown grace.
func WaitGrace(done <-chan struct{}, grace time.Duration, late func()) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		late()
		<-done
	}
}
