// Package outcome keeps what became of each accepted job: a Record per
// job, from acceptance until its downstream's outcomes.keep after it
// ends, and the changes of state that make it.
package outcome
