// Package natsout provides the NATS side of job records: the record
// store of a jetstream downstream (Store, an outcome.Store), the stream
// that keeps its events (Store.EnsureEvents), the publisher of events and
// outcomes (Teller, an outcome.Teller), and the service that answers
// status requests (Responder).
//
// Records. Downstream D's records are kept in two streams (the durable
// queue's prefixes; SHAPER and shaper.queue by default), one message per
// job in each, the record as JSON:
//
//   - <StreamPrefix>_OUTCOMES_LIVE_D, on
//     <SubjectPrefix>-outcomes.D.live.<job id>: the records of jobs not yet
//     ended, with no TTL, so a job queued for days keeps its record. It has
//     no byte bound: it holds one record per queued or running job, so the
//     queue's capacity bounds it.
//   - <StreamPrefix>_OUTCOMES_D, on
//     <SubjectPrefix>-outcomes.D.done.<job id>: the finished records, each
//     carrying its downstream's outcomes.keep as its Nats-TTL, in whole
//     seconds, so the server removes it once that passed. Its MaxBytes is
//     the downstream's room for records.
//
// Both keep one message per subject (a job's later record replaces the
// earlier), allow direct gets and per-message TTLs. Put publishes a
// batch without waiting between messages and returns once all were
// acknowledged: a record of a job not yet ended is one message on its
// live subject; a final record is one on its done subject and an empty
// marker on its live subject, with a TTL of 1 s (the server's least),
// which replaces the job's live record and goes soon after. A status
// look-up is a direct get of the last message on the job's live subject,
// answered by any replica, and, when there is none or only the marker,
// one on its done subject: so a job replayed after it ended is answered
// by its new live record, not the final one it had.
//
// Room. Past their room the oldest finished records go, never a queued
// or running job's. After a Put that wrote finished records of D, at
// most once a second per downstream, the store reads the finished
// stream's state, and when it holds more than 90% of its MaxBytes purges
// the oldest down to about 80%; the server answers how many went, and
// Settings.Discarded is told (shaper_outcome_records_discarded_total).
// The stream's own MaxBytes (discard old) is a hard bound behind that:
// when records come faster than a second's trimming allows for, the
// server discards the oldest finished records itself, and those discards
// are not counted (the server removes them as silently as records past
// their TTL, which are not discards either). Store.Records gives the
// records held in both streams, for the records gauge.
//
// Earlier layout. A records stream of the earlier layout, on
// <SubjectPrefix>-outcomes.D.*, holding every record, is moved to the
// done subjects by Ensure; the records it held are left unread and go
// with their TTL or past the room.
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
