package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Live are a lane's own counts: tries started and tries answered with
// success since the lane was created, tries in flight and jobs queued.
type Live struct {
	Started, Succeeded uint64
	Inflight, Depth    int
}

// LiveFunc reads a lane's counts now (see Lane.ReadFrom).
type LiveFunc func() Live

// liveCollector exports shaper_jobs_started_total,
// shaper_jobs_delivered_total{outcome=Labels.Success}, shaper_inflight and
// shaper_queue_depth. A lane writes none of them per start or answer: a
// scrape first brings each lane's series up to the lane's own counts,
// then collects the vectors as they are. The series stay those of the
// vectors (name, labels, type, created time): a counter gains what its
// lanes counted since the last scrape, so it carries on across lanes of
// one name as it did when lanes wrote it; a gauge is the sum over the
// live lanes of its name.
type liveCollector struct {
	vecs []prometheus.Collector // Started, Delivered, Depth, Inflight

	mu sync.Mutex // serializes syncs; guards by
	by map[string][]*liveSource
}

// liveSource is one lane's series and how far its counters were synced.
type liveSource struct {
	name                   string
	f                      LiveFunc // nil until Lane.ReadFrom
	started, succeeded     prometheus.Counter
	depth, inflight        prometheus.Gauge
	seenStart, seenSuccess uint64
}

func newLiveCollector(vecs ...prometheus.Collector) *liveCollector {
	return &liveCollector{vecs: vecs, by: map[string][]*liveSource{}}
}

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs {
		v.Describe(ch)
	}
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	c.sync()
	for _, v := range c.vecs {
		v.Collect(ch)
	}
}

// sync brings every lane's series up to its counts. A LiveFunc takes its
// lane's lock: lanes never take c.mu under theirs.
func (c *liveCollector) sync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, srcs := range c.by {
		depth, inflight, read := 0, 0, false
		for _, s := range srcs {
			if s.f == nil {
				continue
			}
			v := s.f()
			read = true
			if v.Started > s.seenStart {
				s.started.Add(float64(v.Started - s.seenStart))
				s.seenStart = v.Started
			}
			if v.Succeeded > s.seenSuccess && s.succeeded != nil {
				s.succeeded.Add(float64(v.Succeeded - s.seenSuccess))
				s.seenSuccess = v.Succeeded
			}
			depth += v.Depth
			inflight += v.Inflight
		}
		if read {
			srcs[0].depth.Set(float64(depth))
			srcs[0].inflight.Set(float64(inflight))
		}
	}
}

// add makes s one of its name's sources.
func (c *liveCollector) add(s *liveSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[s.name] = append(c.by[s.name], s)
}

// forget drops every source of name.
func (c *liveCollector) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.by, name)
}

// ReadFrom sets where the lane's started, success, in-flight and depth
// series are read from when scraped: f, the lane's own counts, which
// never go down while the lane lives. The lane writes those series no
// other way.
func (lm *Lane) ReadFrom(f LiveFunc) {
	lm.live.mu.Lock()
	defer lm.live.mu.Unlock()
	lm.src.f = f
}
