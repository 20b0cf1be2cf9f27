package shaper

import "github.com/shaperd/shaper/limiter"

// statser is an admitter that can tell how many keys it holds: the
// in-memory limiter (limiter.Keyed). Remote stores do not.
type statser interface {
	Stats() limiter.Stats
}

// wrapper is an admitter that wraps another (shadow mode, several limits).
type wrapper interface {
	unwrap() []admitter
}

func (a shadowAdmitter) unwrap() []admitter { return []admitter{a.admitter} }

// admissionStats adds up the key counts of a's in-memory limiters, looking
// through wrappers; ok is false when none keeps its keys in this process.
func admissionStats(a admitter) (st limiter.Stats, ok bool) {
	switch a := a.(type) {
	case nil:
		return st, false
	case statser:
		return a.Stats(), true
	case wrapper:
		for _, inner := range a.unwrap() {
			if s, innerOK := admissionStats(inner); innerOK {
				st.Keys += s.Keys
				st.CapHits += s.CapHits
				st.Evictions += s.Evictions
				st.Forgotten += s.Forgotten
				ok = true
			}
		}
	}
	return st, ok
}
