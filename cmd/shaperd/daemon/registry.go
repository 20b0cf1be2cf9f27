package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry is the registry New makes when the caller passes none: a
// fresh one (never the global default), carrying the Go runtime's go_*
// series (goroutines, heap, GC, threads) and the process's process_*
// series (resident memory, CPU, open and maximum file descriptors, start
// time; the latter exist where client_golang can read them, Linux among
// them), which dashboards and restart and leak alerts read. A registry
// the caller passes is the caller's: New adds neither collector to it.
//
// MustRegister cannot fail here, as promauto's on a fresh registry cannot:
// the registry is empty and the two collectors' names do not overlap.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}
