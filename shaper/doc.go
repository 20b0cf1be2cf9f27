// Package shaper paces jobs from bounded per-downstream queues into their
// sinks at a constant rate (a leaky bucket), with optional per-key admission.
//
// # Intake
//
// Every submission takes one path, whatever the lane's queue kind and
// admission store (lane.submit): under the lane's lock, shutting down
// (unavailable), unknown lane (unknown_downstream), cost (bad_request), a
// full bucket (queue_full, Retry-After = time until the next start frees a
// slot), the key's share under fairness (queue_full), the predicted start
// (would_expire); then the lane's admission rule (package admission;
// rate_limited, Retry-After = the limiter's), decided under the lock, or
// with it released when the decision does I/O and passed back as a value;
// then the queue (package queue) takes the job, and its Stored answers
// once the lock is released. Capacity is checked before admission, so a
// queue_full rejection never costs the key a token. The bucket's level is
// the queued cost plus the job started in the current drain interval (it
// is still leaking out): a burst into an idle lane accepts exactly
// Capacity jobs, however the scheduler interleaves.
//
// A dead letter offered back (Shaper.Replay) takes the same checks and
// queue but never the admission rule, and only when the lane has no live
// job waiting and its next slot is due: Replay waits for that on the
// lane's readiness (its next free start, or a change of its schedule);
// TryReplay answers busy instead (ErrBusy, with when to ask again).
//
// # Pacing
//
// One scheduler goroutine owns one time.Timer and a min-heap of lanes keyed
// by when each next wants to start (package wake); there is no goroutine or
// timer per job or per lane. Starts follow an absolute schedule (schedule.go, the only
// writer of a lane's next slot and rate): each start takes slot s = max(next,
// the job's ready time, the policies' NotBefore), then next = s + cost/rate.
// A scheduler that wakes late starts every slot it missed, but never slots
// older than 20 ms (catch-up bound). A lane that could not start — empty,
// paused, at its concurrency cap, held by a policy — restarts its schedule
// from the moment it could (no catch-up after idle). Hence starts never
// exceed rate×W + 1 over a window W except for the bounded catch-up, and the
// long-run rate equals the effective rate. Deliveries run on a pool of
// worker goroutines that outlive one try (package pool), so a blocking sink
// holds up only its own try; at most Concurrency run per lane.
//
// When and how fast a lane may start is decided by its policies (package
// policy), each a value behind one interface: the downstream's pushback
// pause, its advertised quota, the adaptive rate, the circuit breaker, the
// admin API's pause and the hold while a kept learned rate is read.
// Each observes the lane's starts and answers, and answers a Gate; the lane
// asks all of them and takes the strictest answer (policies.go): the latest
// NotBefore, the lowest rate cap (the configured rate is one), the lowest
// in-flight limit (the concurrency is one), and no start at all while any
// holds. A new policy is one file in package policy and one entry in the
// lane's list.
//
// # Outcomes
//
// Every answer is first booked by every policy, in the lane's order: the
// advertised quota (rate-limit headers: "remaining 0" pauses the lane until
// the downstream's reset, starts are held while the tries in flight would
// use more than the remaining quota, and an adaptive lane's rate is capped
// at quota ÷ window), the adaptive rate (cut on a 429/503, raised after
// rounds of successes), the breaker (consecutive failures hold the lane
// until a probe succeeds) and the pushback pause. Then the job is dealt
// with by its error. A nil Sink error is success. *policy.PushbackError pauses
// that lane until now+RetryAfter and puts the job back first; it counts as
// a try (Job.Attempt increases) but not against RetryPolicy.MaxAttempts.
// *policy.PermanentError fails the job at once. Other errors retry with
// exponential backoff and equal jitter (see backoff) up to MaxAttempts
// tries; a retry goes ahead of newer jobs once its backoff has elapsed and
// takes a start slot like any start. A job that fails for good is
// dead-lettered with ReasonFailed. A job that cannot start by its Deadline
// (set at acceptance from Job.MaxWait or LaneSettings.MaxWait) — at the
// front of the queue, or because a backoff or pushback would outlast it —
// is dropped as expired without taking a slot and never sent late. Expiry is
// checked at the front of the queue: when a start reaches the job, and when
// a Submit finds the bucket full.
//
// # Lifecycle
//
// Run starts the shaper's background services as one list (services.go;
// package service) and, once its context ends, stops them in reverse:
// the scheduler, then intake, then in-flight deliveries, which get
// Settings.ShutdownGrace (then are cancelled: those jobs are dead-lettered
// as shutdown); every queued job is dead-lettered with ReasonShutdown,
// the keeper saves, dead letters are flushed, sinks and queues close. Apply reconfigures in
// place (see Apply). Dead letters are published by one goroutine (package
// outbox), in order per downstream, outside every lock; a job is given up (a durable one
// deleted) only once the DeadLetterer took its dead letter, and one it
// refuses is tried again, 1 s doubling to 30 s, while the job stays queued.
//
// The lane's queue is a queue.Roles: the queue.Queue every kind is, and
// the roles its kind plays. A queue.Bucket or queue.Fair in memory plays
// queue.Memory (and Fair queue.Shares); a durable kind (Deps.Queues;
// package queue/jetstream stores jobs in NATS JetStream) instead plays
// queue.Settler and queue.Service: its store enforces the bound, answers
// Offer asynchronously and keeps its jobs at shutdown. Sinks are built by Deps.Sinks (package shaper/sink).
//
// The configuration (Settings, LaneSettings, Override) is package
// settings' types by the names above: their defaults and validation live
// there. What adaptive lanes learned is kept across restarts and
// takeovers by package keep (Deps.Rates); the lane restores what it reads. The
// arithmetic behind a refusal's Retry-After and the would_expire check is
// package predict's, on values the lane gathers under its lock.
//
// Logs use log/slog and never contain admission keys or payloads.
package shaper
