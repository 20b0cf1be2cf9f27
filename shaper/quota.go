package shaper

import (
	"time"

	"github.com/shaperd/shaper/shaper/policy"
)

// AdvertisedQuota is a downstream's advertised quota, as LaneStatus shows
// it: Limit starts per WindowSeconds, and (when the downstream said so)
// how many are left until ResetAt.
type AdvertisedQuota struct {
	Limit         int        `json:"limit"`
	WindowSeconds float64    `json:"window_seconds"`
	Remaining     *int       `json:"remaining,omitempty"`
	ResetAt       *time.Time `json:"reset_at,omitempty"`
}

// advertised is q as LaneStatus shows it; nil when nothing was advertised.
func advertised(q policy.QuotaState) *AdvertisedQuota {
	if q.Limit <= 0 || q.Window <= 0 {
		return nil
	}
	a := &AdvertisedQuota{Limit: q.Limit, WindowSeconds: q.Window.Seconds()}
	if q.Known {
		left := max(q.Left, 0)
		a.Remaining = &left
	}
	if !q.ResetAt.IsZero() {
		t := q.ResetAt
		a.ResetAt = &t
	}
	return a
}
