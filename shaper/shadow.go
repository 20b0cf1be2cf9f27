package shaper

// Shadow mode evaluates a policy and counts what it would reject
// (shaper_shadow_rejections_total{downstream,reason}) without rejecting, so
// a policy can be rolled out safely. LaneSettings.Shadow covers every policy
// of the lane (the admission rule, would_expire, the per-key share);
// AdmissionShadow the admission rule alone (package admission wraps it).
// The queue's capacity is the memory bound of the lane and is always
// enforced.

// shadowReasons are the reasons a shadowed policy can give.
var shadowReasons = []Reason{ReasonRateLimited, ReasonWouldExpire, ReasonQueueFull}

// shadowed reports whether the lane is in shadow mode and, if so, counts
// the rejection it just skipped. Requires l.mu.
func (l *lane) shadowed(r Reason) bool {
	if !l.cfg.Shadow {
		return false
	}
	l.m.Shadow[string(r)].Inc()
	return true
}

// shadowChanged reports whether the shadow flags differ (the admitter must
// be wrapped again; a shadow flip keeps no limiter state).
func shadowChanged(a, b LaneSettings) bool {
	return a.Shadow != b.Shadow || a.AdmissionShadow != b.AdmissionShadow
}
