package daemon

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A start-up check whose request is lost is tried again after startTry,
// not after the whole budget; a final error ends the tries; a check that
// never succeeds ends with the budget.
func TestRetryStart(t *testing.T) {
	errFinal := errors.New("final")
	for _, tc := range []struct {
		name     string
		lost     int   // tries whose request is lost (they wait for their deadline)
		fail     error // the answer of every try after those (nil: success)
		want     error
		wantTook time.Duration
		tries    int
	}{
		{name: "healthy", want: nil, wantTook: 0, tries: 1},
		{name: "one lost request", lost: 1, want: nil, wantTook: startTry + startPause, tries: 2},
		{name: "two lost requests", lost: 2, want: nil, wantTook: startTry + startPause + 2*startTry + 2*startPause, tries: 3},
		{name: "final error", lost: 1, fail: errFinal, want: errFinal, wantTook: startTry + startPause, tries: 2},
		{name: "never", lost: 100, want: context.DeadlineExceeded, wantTook: ensureTimeout, tries: 4}, // 1 s, 2 s, 4 s, then the rest
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), ensureTimeout)
				defer cancel()
				tries := 0
				check := func(ctx context.Context) error {
					tries++
					if tries <= tc.lost {
						<-ctx.Done()
						return ctx.Err()
					}
					return tc.fail
				}
				t0 := time.Now()
				err := retryStart(ctx, check, func(err error) bool { return errors.Is(err, errFinal) })
				if !errors.Is(err, tc.want) || time.Since(t0) != tc.wantTook || tries != tc.tries {
					t.Errorf("retryStart: %v after %s and %d tries, want %v after %s and %d tries",
						err, time.Since(t0), tries, tc.want, tc.wantTook, tc.tries)
				}
			})
		})
	}
}
