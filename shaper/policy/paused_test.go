package policy

import (
	"testing"
	"time"
)

// TestPaused: a pause holds every start while on, whatever the tries,
// and gives no time to wake for; off, it allows everything.
func TestPaused(t *testing.T) {
	var p Paused
	steps := []struct {
		name string
		on   bool
		want Gate
	}{
		{"zero value", false, Gate{}},
		{"paused", true, Gate{Held: true}},
		{"still paused after answers", true, Gate{Held: true}},
		{"resumed", false, Gate{}},
	}
	for i, st := range steps {
		now := t0.Add(time.Duration(i) * time.Second)
		p.On = st.on
		p.Started(now, try(now))
		p.Finished(now, Answer{Try: try(now), Class: Succeeded})
		if g := p.Gate(now, 1); g != st.want {
			t.Fatalf("%s: Gate = %+v, want %+v", st.name, g, st.want)
		}
	}
}
