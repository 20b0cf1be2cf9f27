package policy

import "time"

// answerRing counts successes per ringWidth over the last ringLen widths
// (32 s, enough for adaptMemoryMax). The zero value is empty.
type answerRing struct {
	head int64 // number of the newest bucket (unix time / ringWidth)
	ok   [ringLen]uint32
}

const (
	ringWidth = 100 * time.Millisecond
	ringLen   = 320
)

func (r *answerRing) add(now time.Time) {
	b := now.UnixNano() / int64(ringWidth)
	r.advance(b)
	r.ok[b%ringLen]++
}

// advance makes bucket b the newest, emptying those it passes.
func (r *answerRing) advance(b int64) {
	if b <= r.head {
		return
	}
	for i := max(r.head+1, b-ringLen+1); i <= b; i++ {
		r.ok[i%ringLen] = 0
	}
	r.head = b
}

// delivered is the successes per second answered over the span before
// now (at most the ring's length), the oldest bucket counted pro rata.
func (r *answerRing) delivered(now time.Time, span time.Duration) float64 {
	ns := now.UnixNano()
	b := ns / int64(ringWidth)
	r.advance(b)
	span = min(span, (ringLen-1)*ringWidth)
	n := int64(span / ringWidth)
	ok := 0.0
	for i := b; i > b-n && i > r.head-ringLen; i-- {
		ok += float64(r.ok[i%ringLen])
	}
	if old := b - n; old > r.head-ringLen {
		part := 1 - float64(ns%int64(ringWidth))/float64(ringWidth) // of the oldest bucket, inside
		ok += float64(r.ok[old%ringLen]) * part
	}
	return ok / span.Seconds()
}
