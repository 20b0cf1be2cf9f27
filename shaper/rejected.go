package shaper

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A rejection's error (Receipt.Err) is what a producer reads: one plain
// sentence naming the queue, its bound where there is one, and what would
// help. The cause behind it (a store's raw answer, a sentinel such as
// queue.ErrFull) is never part of the text; it stays reachable through
// errors.Is and errors.Unwrap, for callers and for the daemon's log.

// plainError is a rejection's sentence with its cause kept apart.
type plainError struct {
	msg   string
	cause error // nil: the sentence is all there is
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.cause }

// plainf returns the sentence format makes, wrapping cause without
// showing it.
func plainf(cause error, format string, args ...any) error {
	return &plainError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// maxNamedDownstreams bounds the configured downstreams an
// unknown_downstream answer names.
const maxNamedDownstreams = 10

// unknownDownstream is the error for a job naming no configured
// downstream: it names the configured ones (at most
// maxNamedDownstreams, then how many more there are).
func (s *Shaper) unknownDownstream(name string) error {
	s.mu.RLock()
	names := make([]string, 0, len(s.active))
	for n := range s.active {
		names = append(names, n)
	}
	s.mu.RUnlock()
	slices.Sort(names)
	switch {
	case len(names) == 0:
		return plainf(ErrUnknownDownstream, "no downstream named %q (none are configured)", name)
	case len(names) > maxNamedDownstreams:
		return plainf(ErrUnknownDownstream, "no downstream named %q (configured: %s and %d more)",
			name, strings.Join(names[:maxNamedDownstreams], ", "), len(names)-maxNamedDownstreams)
	}
	return plainf(ErrUnknownDownstream, "no downstream named %q (configured: %s)", name, strings.Join(names, ", "))
}

// rateLimited is the error for a job its key's admission rate refused.
func rateLimited(downstream, key string, retryAfter time.Duration) error {
	if retryAfter >= time.Millisecond {
		retryAfter = retryAfter.Round(time.Millisecond)
	}
	if key == "" {
		return fmt.Errorf("downstream %s has used up its admission rate; retry in %s", downstream, retryAfter)
	}
	return fmt.Errorf("key %q has used up its admission rate on downstream %s; retry in %s", key, downstream, retryAfter)
}
