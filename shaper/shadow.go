package shaper

import (
	"time"

	"github.com/shaperd/shaper/limiter"
)

// Shadow mode evaluates a limit and counts what it would reject
// (shaper_shadow_rejections_total{downstream,reason}) without rejecting, so
// a limit can be rolled out safely. LaneSettings.Shadow covers every policy
// of the lane (the admission rule, would_expire, the per-key share);
// AdmissionShadow the admission rule alone. The queue's capacity is the
// memory bound of the lane and is always enforced.

// shadowReasons are the reasons a shadowed policy can give.
var shadowReasons = []Reason{ReasonRateLimited, ReasonWouldExpire, ReasonQueueFull}

// shadowed reports whether the lane is in shadow mode and, if so, counts
// the rejection it just skipped. Requires l.mu.
func (l *lane) shadowed(r Reason) bool {
	if !l.cfg.Shadow {
		return false
	}
	l.m.shadow[r].Inc()
	return true
}

// shadowAdmitter wraps an admitter whose refusals are only counted: a
// refused job is admitted (the limiter was not charged for it).
type shadowAdmitter struct {
	admitter
	count func() // counts one shadow rejection
}

func (a shadowAdmitter) AllowAt(key string, now time.Time, cost int) (limiter.Decision, error) {
	d, err := a.admitter.AllowAt(key, now, cost)
	if err == nil && !d.Allowed {
		a.count()
		return limiter.Decision{Allowed: true}, nil
	}
	return d, err
}

// shadowAdmission wraps adm in shadow mode when cfg asks for it.
func (s *Shaper) shadowAdmission(adm admitter, cfg LaneSettings) admitter {
	if adm == nil || !(cfg.Shadow || cfg.AdmissionShadow) {
		return adm
	}
	c := s.met.shadow.WithLabelValues(cfg.Name, string(ReasonRateLimited))
	return shadowAdmitter{admitter: adm, count: c.Inc}
}

// shadowChanged reports whether the shadow flags differ (the admitter must
// be wrapped again; a shadow flip keeps no limiter state).
func shadowChanged(a, b LaneSettings) bool {
	return a.Shadow != b.Shadow || a.AdmissionShadow != b.AdmissionShadow
}
