package shaper

import "time"

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
