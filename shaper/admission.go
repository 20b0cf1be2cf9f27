package shaper

import (
	"time"

	"github.com/shaperd/shaper/limiter"
)

// admitter is what a lane needs from its admission limiter
// (*limiter.Keyed): a per-key decision at a given instant, and a sweep of
// idle keys.
type admitter interface {
	AllowAt(key string, now time.Time, cost int) (limiter.Decision, error)
	Sweep(now time.Time) int
}

// newAdmitter builds the limiter for cfg; a nil cfg means no admission
// control (a nil admitter).
func newAdmitter(cfg *limiter.Config) (admitter, error) {
	if cfg == nil {
		return nil, nil
	}
	k, err := limiter.NewKeyed(*cfg)
	if err != nil {
		return nil, err
	}
	return k, nil
}
