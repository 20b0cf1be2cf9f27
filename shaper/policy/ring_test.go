package policy

import (
	"math"
	"testing"
	"time"
)

func TestAnswerRing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r answerRing
	for i := range 100 { // 50/s for 2 s
		r.add(t0.Add(time.Duration(i) * 20 * time.Millisecond))
	}
	now := t0.Add(2 * time.Second)
	for _, tc := range []struct {
		span time.Duration
		want float64
	}{{time.Second, 50}, {2 * time.Second, 50}, {4 * time.Second, 25}, {time.Hour, 100.0 / 31.9}} {
		if got := r.delivered(now, tc.span); math.Abs(got-tc.want) > 0.5 {
			t.Errorf("delivered over %v = %.2f, want %.2f", tc.span, got, tc.want)
		}
	}
	if got := r.delivered(now.Add(40*time.Second), time.Second); got != 0 {
		t.Errorf("delivered after the ring's span %v, want 0", got)
	}
}
