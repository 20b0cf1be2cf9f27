package natskv

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/shaperd/shaper/limiter"
)

// algo is one limiter rule seen by the store: limiter's pure transition,
// a fixed binary codec for the state, and the instant the state becomes
// fresh (for the key's TTL). charge is set only for the rules approximate
// mode supports.
type algo[S any] struct {
	tag     byte // first byte of an encoded state: which rule wrote it
	fresh   func(now int64) S
	decide  func(s S, now int64, cost int) (limiter.Decision, S, error)
	freshAt func(s S, now int64) int64
	enc     func(dst []byte, s S) []byte
	dec     func(b []byte) (S, bool)
	// charge spends n units at now even beyond the capacity (debt), for
	// approximate mode's reconciliation.
	charge func(s S, now int64, n int) S
	// refund gives back cost units charged at now (limiter's pure Refund).
	refund func(s S, now int64, cost int) S
}

// Tags of encoded states. A state written by another rule (the config
// changed) decodes as absent: the key starts fresh.
const (
	tagTokenBucket byte = 1 + iota
	tagGCRA
	tagFixedWindow
	tagSlidingCounter
	tagSlidingLog
)

var le = binary.LittleEndian

// ceilNs returns ceil(x) nanoseconds as int64, saturating.
func ceilNs(x float64) int64 {
	if x >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(x))
}

func tokenBucketAlgo(cfg limiter.Config) (algo[limiter.TokenBucketState], error) {
	r, err := limiter.NewTokenBucket(cfg.Rate, cfg.Burst)
	if err != nil {
		return algo[limiter.TokenBucketState]{}, err
	}
	burst, rate := float64(cfg.Burst), cfg.Rate
	tokensAt := func(s limiter.TokenBucketState, now int64) float64 {
		if now <= s.Last {
			return s.Tokens
		}
		return math.Min(burst, s.Tokens+float64(now-s.Last)/1e9*rate)
	}
	return algo[limiter.TokenBucketState]{
		tag: tagTokenBucket, fresh: r.Fresh, decide: r.Decide, refund: r.Refund,
		freshAt: func(s limiter.TokenBucketState, _ int64) int64 {
			if s.Tokens >= burst {
				return s.Last
			}
			return s.Last + ceilNs((burst-s.Tokens)/rate*1e9)
		},
		enc: func(dst []byte, s limiter.TokenBucketState) []byte {
			dst = append(dst, tagTokenBucket)
			dst = le.AppendUint64(dst, math.Float64bits(s.Tokens))
			return le.AppendUint64(dst, uint64(s.Last))
		},
		dec: func(b []byte) (limiter.TokenBucketState, bool) {
			if len(b) != 17 || b[0] != tagTokenBucket {
				return limiter.TokenBucketState{}, false
			}
			s := limiter.TokenBucketState{Tokens: math.Float64frombits(le.Uint64(b[1:])), Last: int64(le.Uint64(b[9:]))}
			return s, !math.IsNaN(s.Tokens) && s.Tokens <= burst
		},
		charge: func(s limiter.TokenBucketState, now int64, n int) limiter.TokenBucketState {
			return limiter.TokenBucketState{Tokens: tokensAt(s, now) - float64(n), Last: max(now, s.Last)}
		},
	}, nil
}

func gcraAlgo(cfg limiter.Config) (algo[limiter.GCRAState], error) {
	r, err := limiter.NewGCRA(cfg.Rate, cfg.Burst)
	if err != nil {
		return algo[limiter.GCRAState]{}, err
	}
	interval := int64(r.Interval())
	return algo[limiter.GCRAState]{
		tag: tagGCRA, fresh: r.Fresh, decide: r.Decide, refund: r.Refund,
		freshAt: func(s limiter.GCRAState, _ int64) int64 { return s.TAT },
		enc: func(dst []byte, s limiter.GCRAState) []byte {
			return le.AppendUint64(append(dst, tagGCRA), uint64(s.TAT))
		},
		dec: func(b []byte) (limiter.GCRAState, bool) {
			if len(b) != 9 || b[0] != tagGCRA {
				return limiter.GCRAState{}, false
			}
			return limiter.GCRAState{TAT: int64(le.Uint64(b[1:]))}, true
		},
		charge: func(s limiter.GCRAState, now int64, n int) limiter.GCRAState {
			return limiter.GCRAState{TAT: max(s.TAT, now) + int64(n)*interval}
		},
	}, nil
}

func fixedWindowAlgo(cfg limiter.Config) (algo[limiter.FixedWindowState], error) {
	r, err := limiter.NewFixedWindow(cfg.Limit, cfg.Window)
	if err != nil {
		return algo[limiter.FixedWindowState]{}, err
	}
	w := int64(cfg.Window)
	return algo[limiter.FixedWindowState]{
		tag: tagFixedWindow, fresh: r.Fresh, decide: r.Decide, refund: r.Refund,
		freshAt: func(s limiter.FixedWindowState, now int64) int64 {
			if s.Count == 0 {
				return now
			}
			return s.Start + w
		},
		enc: func(dst []byte, s limiter.FixedWindowState) []byte {
			dst = le.AppendUint64(append(dst, tagFixedWindow), uint64(s.Start))
			return le.AppendUint64(dst, uint64(s.Count))
		},
		dec: func(b []byte) (limiter.FixedWindowState, bool) {
			if len(b) != 17 || b[0] != tagFixedWindow {
				return limiter.FixedWindowState{}, false
			}
			s := limiter.FixedWindowState{Start: int64(le.Uint64(b[1:])), Count: int64(le.Uint64(b[9:]))}
			return s, s.Count >= 0 && s.Count <= int64(cfg.Limit)
		},
	}, nil
}

func slidingCounterAlgo(cfg limiter.Config) (algo[limiter.SlidingCounterState], error) {
	r, err := limiter.NewSlidingCounter(cfg.Limit, cfg.Window)
	if err != nil {
		return algo[limiter.SlidingCounterState]{}, err
	}
	w := int64(cfg.Window)
	return algo[limiter.SlidingCounterState]{
		tag: tagSlidingCounter, fresh: r.Fresh, decide: r.Decide, refund: r.Refund,
		freshAt: func(s limiter.SlidingCounterState, now int64) int64 {
			switch {
			case s.Curr > 0:
				return s.Start + 2*w
			case s.Prev > 0:
				return s.Start + w
			}
			return now
		},
		enc: func(dst []byte, s limiter.SlidingCounterState) []byte {
			dst = le.AppendUint64(append(dst, tagSlidingCounter), uint64(s.Start))
			dst = le.AppendUint32(dst, uint32(s.Prev))
			return le.AppendUint32(dst, uint32(s.Curr))
		},
		dec: func(b []byte) (limiter.SlidingCounterState, bool) {
			if len(b) != 17 || b[0] != tagSlidingCounter {
				return limiter.SlidingCounterState{}, false
			}
			s := limiter.SlidingCounterState{Start: int64(le.Uint64(b[1:])),
				Prev: int32(le.Uint32(b[9:])), Curr: int32(le.Uint32(b[13:]))}
			lim := int32(min(cfg.Limit, math.MaxInt32))
			return s, s.Prev >= 0 && s.Curr >= 0 && s.Prev <= lim && s.Curr <= lim
		},
	}, nil
}

func slidingLogAlgo(cfg limiter.Config) (algo[limiter.SlidingLogState], error) {
	r, err := limiter.NewSlidingLog(cfg.Limit, cfg.Window)
	if err != nil {
		return algo[limiter.SlidingLogState]{}, err
	}
	w := int64(cfg.Window)
	return algo[limiter.SlidingLogState]{
		tag: tagSlidingLog, fresh: r.Fresh, decide: r.Decide, refund: r.Refund,
		freshAt: func(s limiter.SlidingLogState, now int64) int64 {
			ts := s.Times(nil)
			if len(ts) == 0 {
				return now
			}
			return ts[len(ts)-1] + w
		},
		// The log is its instants, oldest first, 8 bytes each.
		enc: func(dst []byte, s limiter.SlidingLogState) []byte {
			dst = append(dst, tagSlidingLog)
			for _, t := range s.Times(nil) {
				dst = le.AppendUint64(dst, uint64(t))
			}
			return dst
		},
		dec: func(b []byte) (limiter.SlidingLogState, bool) {
			if len(b) < 1 || b[0] != tagSlidingLog || (len(b)-1)%8 != 0 || (len(b)-1)/8 > cfg.Limit {
				return limiter.SlidingLogState{}, false
			}
			ts := make([]int64, (len(b)-1)/8)
			for i := range ts {
				ts[i] = int64(le.Uint64(b[1+8*i:]))
				if i > 0 && ts[i] < ts[i-1] {
					return limiter.SlidingLogState{}, false
				}
			}
			return limiter.SlidingLogStateOf(ts), true
		},
	}, nil
}

// ttlFor is the Nats-TTL of a state written at now that becomes fresh at
// freshAt: whole seconds (the server's unit), rounded up so a key is never
// forgotten before it is fresh, and at least the server's minimum of 1 s.
func ttlFor(now, freshAt int64) time.Duration {
	d := max(freshAt-now, 0)
	secs := (d + int64(time.Second) - 1) / int64(time.Second)
	return time.Duration(max(secs, 1)) * time.Second
}
