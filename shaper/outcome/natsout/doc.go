// Package natsout provides the NATS side of job records: the record
// store of a jetstream downstream (Store, an outcome.Store), the stream
// that keeps its events (Store.EnsureEvents), the publisher of events and
// outcomes (Teller, an outcome.Teller), and the service that answers
// status requests (Responder).
//
// Records. Downstream D's records are kept in one stream,
// <StreamPrefix>_OUTCOMES_D (the durable queue's prefixes; SHAPER and
// shaper.queue by default), one message per job on
// <SubjectPrefix>-outcomes.D.<job id>, the record as JSON. The stream
// keeps one message per subject, allows direct gets and per-message
// TTLs, and discards old messages. Every change of a job is one publish
// on its subject, which replaces its earlier record: a record of a job
// not yet ended has no TTL, so a job queued for days keeps its record;
// a final record carries its downstream's outcomes.keep as its
// Nats-TTL, in whole seconds, so the server removes it once that passed.
// Put publishes a batch without waiting between messages and returns
// once all were acknowledged. A status look-up is a direct get of the
// last message on the job's subject, answered by any replica; a job
// replayed after it ended is answered by its new record.
//
// Room. The stream has no byte bound of its own: the store trims the
// finished records to the downstream's room, and the records of jobs
// not yet ended, one small record per queued or running job, are
// bounded by the queue's capacity. Past the room only the oldest
// finished records go, never a queued or running job's, and every one
// that goes is counted. After a Put that wrote finished records of D, at
// most once a second per downstream, the store reads the stream's
// state, and when it holds more than 90% of the room chooses the oldest
// records to purge for about 80%: it reads them, headers only, through
// an ephemeral consumer (at most 100 000 in one trim; the rest on later
// ones), publishes each record without a TTL among them once more on
// its subject, expecting the subject's last sequence to be the one read
// (so a record another instance changed meanwhile is left alone: its
// newer version lies past them already), and purges every message
// below them: finished records only. The server answers how many went,
// and Settings.Discarded is told (shaper_outcome_records_discarded_total).
// Store.Records gives the records held, for the records gauge.
//
// Earlier layouts. A records stream of an earlier layout, on
// <SubjectPrefix>-outcomes.D.done.* or <SubjectPrefix>-outcomes.D.*, is
// moved to this one's subjects by Ensure; the records it held on other
// subjects are left unread, and go with their TTL or past the room. The
// live records' stream of the two-stream layout,
// <StreamPrefix>_OUTCOMES_LIVE_D, is deleted: that layout was never
// released.
//
// Events. With events on, D's changes of state are core publishes on
// <events prefix>.D.<state>; on a jetstream downstream the stream
// <StreamPrefix>_EVENTS_D captures them, kept outcomes.keep within its
// room, the oldest discarded first, so a consumer that was away reads
// what it missed.
//
// Outcomes. A job sent with Shaper-Reply-To (ValidReplyTo checks it at
// intake) has its final outcome published there by Teller.Outcome: the
// downstream's answer body and the Shaper-* headers.
//
// Status. Every instance answers status requests on
// <status prefix>.D.<job id> (no queue group): an instance that does not
// know a job of a downstream whose records are its own waits
// unknownDelay before it answers unknown, so that the one that knows it
// answers first; a shared (JetStream) downstream is answered at once.
package natsout
