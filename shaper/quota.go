package shaper

import "github.com/shaperd/shaper/shaper/policy"

// AdvertisedQuota is a downstream's advertised quota, as LaneStatus shows
// it (package policy declares it with the quota it describes).
type AdvertisedQuota = policy.AdvertisedQuota
