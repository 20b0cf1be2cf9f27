package main

import (
	"context"
	"math"
	"sync"
	"time"
)

// sendPaced calls send(k) for k in 0..n-1 from up to concurrency workers,
// each no earlier than its slot t0 + k/rate (see pace), and returns when
// every call has.
func sendPaced(ctx context.Context, concurrency, n int, rate float64, t0 time.Time, send func(k int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(concurrency, n) {
		wg.Go(func() {
			for k := range next {
				send(k)
			}
		})
	}
	pace(ctx, next, n, rate, t0)
	close(next)
	wg.Wait()
}

// scheduleAt is the instant of send k on the absolute schedule t0 + k/rate,
// so a late send is followed by on-time ones rather than shifting them all.
func scheduleAt(t0 time.Time, k int, rate float64) time.Time {
	return t0.Add(time.Duration(math.Round(float64(k) / rate * float64(time.Second))))
}

// pace hands indexes 0..n-1 to the workers, each no earlier than its slot
// (no pacing when rate is 0). It stops early when ctx ends.
func pace(ctx context.Context, next chan<- int, n int, rate float64, t0 time.Time) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for k := range n {
		if rate > 0 {
			if d := time.Until(scheduleAt(t0, k, rate)); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case next <- k:
		case <-ctx.Done():
			return
		}
	}
}
