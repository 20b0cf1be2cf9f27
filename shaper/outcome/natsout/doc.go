// Package natsout provides the NATS side of job records: the record
// store of a jetstream downstream (Store, an outcome.Store), the stream
// that keeps its events (Store.EnsureEvents), the publisher of events and
// outcomes (Teller, an outcome.Teller), and the service that answers
// status requests (Responder).
//
// Records. Downstream D's records are in the stream
// <StreamPrefix>_OUTCOMES_D (the durable queue's prefixes; SHAPER and
// shaper.queue by default), one message per job on
// <SubjectPrefix>-outcomes.D.<job id>: the record as JSON. The stream
// keeps one message per subject (a job's later record replaces the
// earlier), allows direct gets (a status look-up is one direct get of the
// last message on the job's subject, answered by any replica) and
// per-message TTLs: a final record carries its downstream's
// outcomes.keep as its Nats-TTL, in whole seconds, so the server removes
// it once that passed; a record of a job not yet ended carries none, so a
// job queued for days keeps its record. Put publishes a batch of records
// without waiting between them and returns once all were acknowledged.
//
// Room. The stream's MaxBytes is the downstream's room for records, and
// past it the server discards the oldest message, whatever its state
// (discard old): a job queued longer than the stream takes to fill with
// newer records loses its record, and a status look-up then answers
// unknown until the job's next change of state writes it again. A stream
// cannot tell a message it must keep from one it may drop, so keeping
// queued jobs' records safe would take a second stream for them. Room should therefore be sized for the
// records written in outcomes.keep; a record is a few hundred bytes plus
// the result body it keeps.
//
// Discards are not counted: the server removes a message discarded for
// room as silently as one past its TTL or one a newer record of its job
// replaced, and neither the stream's state nor an advisory tells them
// apart. Store.Records gives the records held, for the records gauge.
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
