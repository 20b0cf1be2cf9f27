package daemon

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaperd/shaper/config"
)

// families returns the names of the metric families reg gathers.
func families(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
	}
	return out
}

// The registry the daemon makes for itself carries the Go and process
// collectors; a registry the caller passes gets neither (it is the
// caller's, and may carry them already).
func TestRegistryCollectors(t *testing.T) {
	want := []string{"go_goroutines", "go_memstats_heap_inuse_bytes"}
	if runtime.GOOS == "linux" { // where client_golang reads /proc
		want = append(want, "process_resident_memory_bytes", "process_open_fds", "process_max_fds",
			"process_start_time_seconds")
	} else {
		t.Logf("process_* not checked on %s: client_golang's process collector reads /proc", runtime.GOOS)
	}
	log := slog.New(slog.DiscardHandler)

	own, err := New(config.Defaults(), Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	got := families(t, own.Registry())
	for _, name := range want {
		if !got[name] {
			t.Errorf("the daemon's own registry lacks %s", name)
		}
	}

	theirs := prometheus.NewRegistry()
	d, err := New(config.Defaults(), Options{Logger: log, Registry: theirs})
	if err != nil {
		t.Fatal(err)
	}
	if d.Registry() != theirs {
		t.Fatal("Registry() is not the registry passed in Options")
	}
	for name := range families(t, theirs) {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("the caller's registry got %s", name)
		}
	}
}
