// Package queue provides the queued Job and every queue kind behind one
// interface, Queue: Bucket, the leaky bucket's bounded FIFO (bounded by the
// cost it holds, retries first once their backoff has passed), and Fair,
// deficit round robin between admission keys inside the same bound. The
// durable kind lives in queue/jetstream. Offer never blocks: a full queue
// refuses with ErrFull. Nothing here starts a goroutine or reads a clock;
// the owning lane's lock serialises every call.
//
// # Roles
//
// A lane uses a queue from three sides, and Queue is the part of each side
// that every kind does: Intake (Offer, Ahead, Len, Cost, Cap), Drain
// (NextReady, Take, RetryLater) and Lifecycle (Configure, Release). What
// only some kinds do is a role of its own, a small interface next to the
// side that uses it:
//
//	side       every kind   only some kinds
//	intake     Intake       Memory (Fits, DropFront): Bucket, Fair
//	                        Shares (Share, Keys): Fair
//	drain      Drain        Settler (Ack, Keep, GiveUp): durable
//	                        Picker (NextReadyIf, TakeIf): every kind here
//	lifecycle  Lifecycle    Service (Start, Close): durable
//	look-up    -            Finder (Find): durable (a job named by its place)
//
// A kind hands its lane a Roles value (its Roles method): the Queue, and
// each optional role it plays, nil where it plays none. The lane asks
// whether a role is there, never which kind it holds, so no kind answers a
// method with a no-op (a Bucket need not pretend to ack, a durable queue
// need not pretend to bound in memory), and no code switches on a queue's
// type. A nil role says something true about the kind: no Memory means a
// store bounds and keeps the jobs (the intake does not check the bound,
// and a removed lane need not wait for them); no Settler means a taken job
// is forgotten, so a job cancelled at shutdown cannot be kept; no Service
// means nothing to start or close; no Finder means the lane names jobs, and
// a waiting job's state is known from its record only.
//
// Roles is a struct of interfaces rather than one interface per
// combination of roles, because the combinations multiply (a fair durable
// kind would be one more) while the lane's questions stay the same; and
// rather than a type switch, because a switch on a queue's type means the
// interface is missing a method.
//
// # Where priorities and delays go
//
// Both change the order jobs start in, not who settles or bounds them, so
// they belong to the parts every kind plays. Both travel on the Job
// (Priority, NotBefore: a job whose NotBefore is after the instant it is
// offered at is delayed). Take starts the ready job of the most urgent
// level (retries first within a level), NextReady answers the earliest
// instant any job is ready (a delayed job's included, so the lane wakes
// for it and paces it like any other), and Ahead (with Placed) counts
// only the cost that starts before the job asked about, which is what
// position, ETA and expiry are computed from. Memory.DropFront drops from
// the jobs that start first. No new role and no switch is needed: each
// kind implements the same methods with its own order. Bucket and Fair
// do so; the durable kind keeps one level and no delayed jobs yet (the
// config and the lane refuse them before they reach it).
//
// # Where per-key concurrency goes
//
// A cap on one key's deliveries in flight is the lane's to count (it
// knows when a try ends); the queue is asked only to pass over the jobs of
// a key at its cap without moving them. That is the Picker role: NextReady
// and Take with a predicate on the key, keeping Take's order among the
// jobs that may start. The durable kind passes over what it has fetched
// (and fetches further ahead while a cap is set: Settings.KeyConcurrency).
// A role rather than a new argument to Take, so that the lane's plain
// path stays as it was when no cap is set, and a kind that could not pass
// jobs over would not have to pretend to.
package queue
