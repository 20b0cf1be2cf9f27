package test

import "testing"

// BenchmarkDurableDrain measures the delivery side of a jetstream lane from
// outside: b.N jobs are queued while the downstream is paused, then it is
// resumed and the timer runs until the HTTP downstream has answered every
// one. The rate (100 000/s) and concurrency (32) bound nothing here: what
// is measured is the drain itself (fetch, take, start, deliver, ack), in
// jobs/s. Compare two commits' test binaries in alternate rounds, with
// -test.short: without it, TestMain builds the shaperd binary while the
// benchmark runs, where its source tree exists (one side only, if the
// other's worktree is gone):
//
//	go test ./test -short -run '^$' -bench '^BenchmarkDurableDrain$' -benchtime 20000x -count 6
//
// It is BenchmarkOutcomesDrain's jetstream lane with the default outcomes.
func BenchmarkDurableDrain(b *testing.B) { benchDrain(b, "jetstream", "") }
