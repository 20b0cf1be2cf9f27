package jetstream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/queue"
)

// memoryOrder is the order the memory backend starts jobs in, for the
// same settings: what the promoter must reproduce.
func memoryOrder(s queue.Settings, fair bool, jobs []*queue.Job) string {
	var q interface {
		queue.Queue
	}
	s.Capacity = len(jobs) + 1
	if fair {
		q = queue.NewFair(s)
	} else {
		q = queue.NewBucket(s)
	}
	now := time.Now()
	for _, j := range jobs {
		c := *j
		_, _, _ = q.Offer(&c, now).Answer()
	}
	var out []string
	for {
		j, _, ok := q.Take(now)
		if !ok {
			return strings.Join(out, " ")
		}
		out = append(out, string(j.Payload))
	}
}

// With a window of one job the stream's order comes from the promoter
// alone: the most urgent level first, deficit round robin between keys
// (weights), FIFO within a key; the same order as the memory backend's.
func TestPromoterOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ls   QueueSettings
		jobs func() []*queue.Job
	}{
		{"levels", QueueSettings{Priorities: 3}, func() []*queue.Job {
			var js []*queue.Job
			for i := range 4 {
				js = append(js, job(fmt.Sprintf("l%d", i), "", 0), job(fmt.Sprintf("m%d", i), "", 2))
			}
			return append(js, job("u0", "", 1), job("u1", "", 1))
		}},
		{"fair", QueueSettings{Fairness: true}, func() []*queue.Job {
			var js []*queue.Job
			for i := range 6 {
				js = append(js, job(fmt.Sprintf("a%d", i), "a", 0))
			}
			return append(js, job("b0", "b", 0), job("b1", "b", 0), job("c0", "c", 0))
		}},
		{"fair levels", QueueSettings{Fairness: true, Priorities: 2}, func() []*queue.Job {
			var js []*queue.Job
			for i := range 4 {
				js = append(js, job(fmt.Sprintf("a%d", i), "a", 0))
			}
			return append(js, job("b0", "b", 0), job("B0", "b", 1), job("A0", "a", 1), job("B1", "b", 1), job("C0", "c", 1))
		}},
		{"weights", QueueSettings{Fairness: true, Weights: map[string]int{"a": 2}}, func() []*queue.Job {
			var js []*queue.Job
			for i := range 6 {
				js = append(js, job(fmt.Sprintf("a%d", i), "a", 0))
			}
			return append(js, job("b0", "b", 0), job("b1", "b", 0), job("b2", "b", 0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := runStore(t)
			ls := tc.ls
			ls.Name, ls.Capacity, ls.Rate, ls.Concurrency = "api", 50, 1, 1
			q := openQueue(t, st, ls)
			jobs := tc.jobs()
			storeAll(t, q, jobs...)
			startQueue(q, func() {})
			defer q.Stop()
			got := strings.Join(takeN(t, q, len(jobs)), " ")
			want := memoryOrder(queue.Settings{Priorities: ls.Priorities, Weights: ls.Weights}, ls.Fairness, jobs)
			if got != want {
				t.Fatalf("starts %s\nwant   %s (the memory backend's)", got, want)
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			if n := len(q.pro.srcs.by); n > len(jobs) {
				t.Fatalf("%d sources known, more than the subjects used", n)
			}
		})
	}
}

// A more urgent job takes a place at once in a window full of less
// urgent ones, and starts next, as on a memory queue.
func TestUrgentJobEntersAFullWindow(t *testing.T) {
	t.Parallel()
	st, _ := runStore(t)
	q := openQueue(t, st, QueueSettings{Name: "api", Capacity: 50, Rate: 1, Concurrency: 2, Priorities: 3})
	for i := range 5 {
		storeAll(t, q, job(fmt.Sprint("o", i), "", 0))
	}
	startQueue(q, func() {})
	defer q.Stop()
	waitHeld(t, q, 2) // the window: two jobs
	storeAll(t, q, job("u", "", 1))
	waitHeld(t, q, 3)
	if got := strings.Join(takeN(t, q, 3), " "); got != "u o0 o1" {
		t.Fatalf("starts %s, want u o0 o1", got)
	}
}
