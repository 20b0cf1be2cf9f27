package settings

// Override is what an operator set over a lane's configured values (PATCH
// /v1/downstreams/{name}); a zero field is not overridden. The zero value
// overrides nothing.
type Override struct {
	Rate        float64 `json:"rate,omitempty"` // starts per second
	Concurrency int     `json:"concurrency,omitempty"`
	Capacity    int     `json:"capacity,omitempty"`
	// MaxJobs overrides batch.max_jobs of a lane with a batch (one
	// without keeps sending one job per call).
	MaxJobs int `json:"max_jobs,omitempty"`
}

// IsZero reports whether o overrides nothing.
func (o Override) IsZero() bool { return o == Override{} }

// Over returns ls with o's values in place of its own.
func (o Override) Over(ls Lane) Lane {
	if o.Rate != 0 {
		ls.Rate = o.Rate
	}
	if o.Concurrency != 0 {
		ls.Concurrency = o.Concurrency
	}
	if o.Capacity != 0 {
		ls.Capacity = o.Capacity
	}
	if o.MaxJobs != 0 && ls.Batch.On() {
		ls.Batch.MaxJobs = o.MaxJobs
	}
	return ls
}
