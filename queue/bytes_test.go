package queue

import (
	"errors"
	"testing"
)

// TestMaxBytes runs one step table over both memory kinds: the byte bound
// refuses a payload that does not fit (ErrMaxBytes, which is also ErrFull),
// and every way a job leaves (take, drop, release) gives its bytes back.
func TestMaxBytes(t *testing.T) {
	kinds := map[string]func(Settings) Roles{
		"bucket": func(s Settings) Roles { return NewBucket(s).Roles() },
		"fair":   func(s Settings) Roles { return NewFair(s).Roles() },
	}
	sized := func(id string, n int) *Job { return &Job{ID: id, Payload: make([]byte, n)} }
	for name, mk := range kinds {
		t.Run(name, func(t *testing.T) {
			q := mk(Settings{Capacity: 10, MaxBytes: 100})
			steps := []struct {
				name    string
				job     *Job
				wantErr error
				bytes   int64
			}{
				{"first fits", sized("a", 60), nil, 60},
				{"second to the bound", sized("b", 40), nil, 100},
				{"one byte over", sized("c", 1), ErrMaxBytes, 100},
				{"empty payload fits", sized("d", 0), nil, 100},
			}
			for _, s := range steps {
				_, err := offer(t, q, s.job, sec(0))
				if !errors.Is(err, s.wantErr) || (s.wantErr == nil) != (err == nil) {
					t.Fatalf("%s: err %v, want %v", s.name, err, s.wantErr)
				}
				if s.wantErr != nil && !errors.Is(err, ErrFull) {
					t.Fatalf("%s: %v does not wrap ErrFull", s.name, err)
				}
				if got := q.Memory.Bytes(); got != s.bytes {
					t.Fatalf("%s: bytes %d, want %d", s.name, got, s.bytes)
				}
			}
			if q.Memory.FitsBytes(1) || !q.Memory.FitsBytes(0) {
				t.Fatal("FitsBytes disagrees with the held bytes")
			}
			j, _, _ := q.Take(sec(1)) // a: 60 bytes leave
			if q.Memory.Bytes() != 40 || !q.Memory.FitsBytes(60) {
				t.Fatalf("after taking %s: bytes %d, want 40", j.ID, q.Memory.Bytes())
			}
			q.RetryLater(j, sec(2), false) // back, counted again
			if q.Memory.Bytes() != 100 {
				t.Fatalf("after a retry: bytes %d, want 100", q.Memory.Bytes())
			}
			q.Memory.DropFront(func(j *Job) bool { return j.ID == "b" })
			if q.Memory.Bytes() != 60 {
				t.Fatalf("after dropping b: bytes %d, want 60", q.Memory.Bytes())
			}
			q.Release()
			if q.Memory.Bytes() != 0 {
				t.Fatalf("after release: bytes %d, want 0", q.Memory.Bytes())
			}
			q.Configure(Settings{Capacity: 10}) // no byte bound
			if _, err := offer(t, q, sized("e", 1000), sec(3)); err != nil {
				t.Fatalf("without a byte bound: %v", err)
			}
		})
	}
}
