package queue

import "time"

var _ Picker = (*Bucket)(nil)

// NextReadyIf is NextReady over the jobs whose key may start (Picker): in
// each level, the first such retry and the first such job of the FIFO.
// It looks at every job passed over.
func (b *Bucket) NextReadyIf(may func(key string) bool) (time.Time, bool) {
	t, ok := b.delayed.next()
	for i := range b.levels {
		lv := &b.levels[i]
		at, lok := lv.firstIf(may)
		if r, rok := lv.retries.firstIf(may); rok && (!lok || r.at.Before(at)) {
			at, lok = r.at, true
		}
		if lok && (!ok || at.Before(t)) {
			t, ok = at, true
		}
	}
	return t, ok
}

// TakeIf is Take of the first job, in Take's order, whose key may start
// (Picker): the most urgent level's first ready such retry, else the
// first such job of its FIFO; a level with none is passed over for the
// next. The jobs passed over keep their places.
func (b *Bucket) TakeIf(now time.Time, may func(key string) bool) (*Job, time.Time, bool) {
	if may == nil {
		return b.Take(now)
	}
	if b.delayed.len() > 0 {
		b.promote(now)
	}
	for i := range b.levels {
		lv := &b.levels[i]
		e, ok := lv.retries.popReadyIf(now, may)
		if !ok {
			e, ok = lv.pollIf(may)
		}
		if ok {
			return b.took(lv, e)
		}
	}
	return nil, time.Time{}, false
}

// firstIf is the ready time of the level's first FIFO job whose key may
// start.
func (lv *level) firstIf(may func(string) bool) (time.Time, bool) {
	for i := range lv.fifo.len() {
		if e := lv.fifo.at(i); allows(may, e.job.Key) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// pollIf removes the level's first FIFO job whose key may start.
func (lv *level) pollIf(may func(string) bool) (entry, bool) {
	for i := range lv.fifo.len() {
		if e := lv.fifo.at(i); allows(may, e.job.Key) {
			return lv.fifo.removeAt(i), true
		}
	}
	return entry{}, false
}
