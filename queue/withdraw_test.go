package queue

import (
	"fmt"
	"testing"
	"time"
)

// withdrawable is what the test needs of both memory kinds.
type withdrawable interface {
	Queue
	Memory
}

// An all-or-nothing offer places jobs one by one and withdraws them, last
// first, when a later one does not fit: the queue is then as it was, on
// every path (one FIFO, priority levels, delayed jobs, fairness between
// keys, a key new to the queue).
func TestWithdrawLeavesTheQueueAsItWas(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name string
		q    withdrawable
	}{
		{"bucket", NewBucket(Settings{Capacity: 10, MaxBytes: 1000})},
		{"bucket levels", NewBucket(Settings{Capacity: 10, MaxBytes: 1000, Priorities: 3})},
		{"fair", NewFair(Settings{Capacity: 10, MaxBytes: 1000})},
		{"fair levels", NewFair(Settings{Capacity: 10, MaxBytes: 1000, Priorities: 3})},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := c.q
			before := []*Job{{ID: "a", Key: "k1", Payload: []byte("aa")}, {ID: "b", Key: "k2", Payload: []byte("bbb"), Priority: 1}}
			for _, j := range before {
				if _, _, err := q.Offer(j, now).Answer(); err != nil {
					t.Fatal(err)
				}
			}
			lenBefore, costBefore, bytesBefore := q.Len(), q.Cost(), q.Bytes()
			batch := []*Job{
				{ID: "c", Key: "k1", Payload: []byte("c")},
				{ID: "d", Key: "new", Payload: []byte("dddd"), Cost: 2, Priority: 2},
				{ID: "e", Key: "k2", Payload: []byte("e"), NotBefore: now.Add(time.Minute)},
				{ID: "f", Key: "new", Payload: []byte("f")},
			}
			for _, j := range batch {
				if _, _, err := q.Offer(j, now).Answer(); err != nil {
					t.Fatal(err)
				}
			}
			for i := len(batch) - 1; i >= 0; i-- {
				if !q.Withdraw(batch[i]) {
					t.Fatalf("Withdraw(%s) = false", batch[i].ID)
				}
			}
			if q.Withdraw(batch[0]) {
				t.Error("a job withdrawn twice was found the second time")
			}
			if q.Len() != lenBefore || q.Cost() != costBefore || q.Bytes() != bytesBefore {
				t.Errorf("after withdrawing: len %d cost %d bytes %d, want %d %d %d", q.Len(), q.Cost(), q.Bytes(), lenBefore, costBefore, bytesBefore)
			}
			var got []string
			for {
				j, _, ok := q.Take(now.Add(time.Hour))
				if !ok {
					break
				}
				got = append(got, j.ID)
			}
			if fmt.Sprint(got) != "[a b]" && fmt.Sprint(got) != "[b a]" {
				t.Errorf("took %v, want only a and b", got)
			}
		})
	}
}

// A job withdrawn from the middle of a level leaves the others in order.
func TestWithdrawFromTheMiddle(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	q := NewBucket(Settings{Capacity: 10})
	jobs := make([]*Job, 5)
	for i := range jobs {
		jobs[i] = &Job{ID: fmt.Sprint(i)}
		q.Offer(jobs[i], now)
	}
	if !q.Withdraw(jobs[2]) {
		t.Fatal("Withdraw = false")
	}
	var got []string
	for {
		j, _, ok := q.Take(now)
		if !ok {
			break
		}
		got = append(got, j.ID)
	}
	if fmt.Sprint(got) != "[0 1 3 4]" {
		t.Errorf("took %v, want [0 1 3 4]", got)
	}
}
