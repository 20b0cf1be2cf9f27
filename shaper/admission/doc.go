// Package admission provides a lane's admission rule as one Admitter,
// whatever it is made of: one limit or several at once (charges refunded
// when one rejects), kept in this process or in a remote store, and
// optionally in shadow mode (refusals counted, not enforced). The shaper
// asks it once per job, on one path for every store: under the lane's lock
// when the decision is local, outside it when Blocks reports that the
// decision does I/O, and passes the decision on as a value.
package admission
