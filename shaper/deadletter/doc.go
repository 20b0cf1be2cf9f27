// Package deadletter provides the dead letters end to end, after a lane
// gave a job up: the store that keeps them (one JetStream stream per
// downstream, bounded by age and count), the publisher the shaper and
// intake hand them to (the store, or a plain publish when the NATS server
// has no JetStream), the worker that stores rejected plain publishes'
// dead letters without making intake wait, the store's metrics, and
// replay: taking stored dead letters back into their lanes at a paced
// rate, each once its lane is ready for it (shaper.Shaper.Replay), with
// the plan of every replay kept in a KV bucket so that the next start
// resumes it.
//
// A lane's own hand-off (a job is given up only once its dead letter was
// taken; retried 1 s doubling to 30 s while the job stays queued) is the
// shaper's, because it holds the lane's lock and its queue; it publishes
// through the shaper.DeadLetterer this package's Publisher implements.
package deadletter
