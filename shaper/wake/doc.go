// Package wake provides Scheduler, which runs registered items at the
// times they ask for: one goroutine and one time.Timer serve a min-heap of
// items keyed by when each next wants to run, so there is no goroutine or
// timer per item.
//
// An item asks with WantAt (or withdraws with ok false); Run pops every
// item that is due and calls its RunDue with the time of the wake-up. A
// heap entry is only a hint: the item re-checks its own state, so a
// spurious or late wake is harmless, and whatever an item makes up for a
// late wake is the item's to bound.
package wake
