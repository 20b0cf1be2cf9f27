package shaper

import "errors"

// ErrClosed is returned by Apply, and Run, once Run has returned or begun to
// shut down.
var ErrClosed = errors.New("shaper: closed")

// ErrUnknownDownstream is returned by lane operations on a name that is not
// configured, and matches the Err of an unknown_downstream receipt.
var ErrUnknownDownstream = errors.New("shaper: unknown downstream")

// ErrInvalidOverride is returned (wrapped, with what is wrong) by
// SetOverride for values the lane cannot run with.
var ErrInvalidOverride = errors.New("shaper: override not valid")

// ErrBusy is wrapped by the Err of a Replay receipt when the lane had a
// live job waiting, or no free slot, at that moment: nothing was offered
// or counted, and RetryAfter says when to ask again.
var ErrBusy = errors.New("shaper: lane busy with live jobs")

// errShuttingDown is ErrClosed as a rejected submission's Err: the plain
// sentence a producer reads, matching ErrClosed under errors.Is (it is
// the same condition, not a sentinel of its own).
var errShuttingDown = plainf(ErrClosed, "shaper is shutting down, so the job was not taken; retry in a moment")

// ErrNoRecords is returned (wrapped, naming the downstream) by Job for a
// downstream that keeps no job records (outcomes.keep 0).
var ErrNoRecords = errors.New("shaper: downstream keeps no job records")
