// Package jetstream provides the durable queue backend (queue.backend:
// jetstream): each downstream's bounded queue is a NATS JetStream stream,
// read in order by one pinned drainer, which starts the jobs of a small
// window; the backlog stays in the stream, whatever its depth.
//
// # Layout
//
// Downstream D gets stream <StreamPrefix>_D (file storage by default,
// work-queue retention, discard new, MaxMsgs = queue.capacity) bound to
// subjects <SubjectPrefix>.D and <SubjectPrefix>.D.>, which are outside
// ingress.subject_prefix so the intake never sees them. The server
// enforces the bound for every instance and producer; a full stream's
// refusal becomes queue_full. The stream's duplicate window is
// ingress.dedupe_window and the producer's Nats-Msg-Id is passed on, so a
// repeated id is stored once while its job is stored.
//
// A job's subject says where it stands in the order: with one level and
// no fairness every job is on .D; with queue.priorities K > 1 level
// L < K−1 is on .D.p<L> and level K−1 on .D; under queue.fairness key
// each key's jobs are on .D.k.<token> (the least urgent level) and
// .D.k.<token>.p<L> (the key in base64url without padding; "" is "_"),
// and the stream has MaxMsgsPerSubject = queue.key_capacity with discard
// new per subject, so the server bounds each key (with levels: each key
// at each level; its delayed jobs apart), in jobs, for every instance (its refusal is
// queue.ErrKeyFull, queue_full naming queue.key_capacity). A job's
// priority (Shaper-Priority: P, absent = the least urgent level) and a
// delayed job's instant (Shaper-Not-Before, unix nanoseconds) are headers
// too, so a job keeps its level in the local order when K changes. A job
// whose instant is more than delayLead ahead when stored is on its
// level's delayed subject, .D.d<L> (under fairness .D.k.<token>.d<L>),
// so that every instance counts the jobs waiting for their instant from
// the stream.
//
// Migration: a stream with the previous version's one subject, .D, is
// updated in place to both subjects, with one log line; its jobs keep
// their meaning (no priority header: the least urgent level; no instant:
// ready; the key from Shaper-Key). Any other subject set is
// ErrIncompatible, never changed. A stream drained by the previous
// version's consumer (it fetched the jobs themselves) has that consumer
// deleted, with one log line: its jobs stay, and are promoted like any
// other (the tries they made are forgotten). Under fairness, a previous
// version's job of an urgent level is on its key's subject and is
// promoted as the least urgent level's (it keeps its level in the local
// order).
//
// # The window
//
// The drain never fetches the queue's stream. The pinned drainer promotes
// the jobs that go next into a window: for each it stores a token, a
// small message naming the job's sequence (header Shaper-Origin), in the
// stream <StreamPrefix>_WINDOW (shared by the queues; work-queue
// retention) on <SubjectPrefix>-window.D, or <SubjectPrefix>-window.D.d<L>
// for a job whose instant is more than delayLead ahead. A durable pull
// consumer per queue, shaperd_D, with priority group "shaperd" and the
// pinned_client policy, delivers the tokens: of several shaperd instances
// exactly one is pinned and receives them; if it stops pulling for
// PinnedTTL the server pins another. So N instances drain at the
// configured rate in total.
//
// The promoter (promote.go) knows each subject of the queue's stream by a
// small entry (its count, how many of its jobs are in the window, the last
// sequence promoted, at most one job read and waiting for its turn), never
// the jobs on it, and fills the window in the memory backend's order: the
// most urgent level with a job to promote; within a level deficit round
// robin between the keys' subjects (weights, costs); FIFO within a
// subject, each next job read from the stream by a get of the first
// message after the last one promoted (the stream's leader answers: a
// replica could still show a job that left). The subjects and their
// counts come from the stream's per-subject state, read every 500 ms, and
// from this instance's stores at once. The window holds max(concurrency,
// rate × 1 s) jobs (at most 1 000; at least 100 under a per-key cap, so
// that the drain can pass over a capped key's jobs) besides those in
// flight and those waiting out a delay or a backoff; its room for a level
// counts only the jobs of that level and the more urgent ones, so a more
// urgent job takes a place at once in a window full of less urgent ones
// (with K levels it holds K windows at most). A token's Nats-Msg-Id
// is D:<sequence>, so a job promoted twice within the duplicate window
// (by two instances while none is pinned, or again after a restart) has
// one token; the fetcher drops a token whose job it holds already, or
// whose job left the stream. The promoter runs on the pinned instance, or
// on every instance while none is pinned, the window holds no token, or
// the window delivered nothing for PinnedTTL + AckWait while jobs wait (a
// refresh reads the consumer's pin and state): no instance waits on a pin
// that outlived its drainer. An instance that finds another pinned hands
// back the jobs it holds and has not started. When no token is pending or
// held anywhere, the cursors are reset, so a job whose token was lost is
// promoted again.
//
// The fetcher (drain.go) holds the window's tokens in a local index of
// the memory kind the settings name (queue.Bucket, or queue.Fair under
// fairness, with the lane's levels and weights), with the jobs the
// promoter read (a token promoted by another instance: its job read from
// the stream), so the order of starts within the window is exactly the
// memory backend's (levels; within a level retries, then DRR between
// keys, FIFO within a key; a delayed job in the kind's delayed set until
// due); the lane's scheduler decides when each starts. A job whose
// delivery ended leaves the stream (its dedupe record stored first, then a
// delete, each waited for and sent again until done), and only then is
// its token acked (termed, when it failed for good or expired, after its
// dead letter was published): a token whose job is gone is dropped when
// delivered again. A failed try naks the token with its backoff delay
// (the retry waits in the window stream; once due it is room for itself,
// so it is fetched, and starts, ahead of the newer jobs held); a pushback
// (429/503 Retry-After) holds the job locally while the lane pauses, so
// it does not count as a try. The job's admission key is stored with it
// (header Shaper-Key).
//
// # Delays
//
// The promoter reads the delayed subjects as they fill and promotes their
// jobs at once, whatever the window's room. A job whose instant is more
// than the lead (2 s) ahead when promoted gets a delayed token (.d<L>):
// fetched, it is handed back with
// NakWithDelay(instant − lead − now), so it waits in the window stream,
// held by the server for every instance and across a crash, and nothing
// of it stays in the drainer. Back within the lead, the job gets a ready
// token and the delayed one is acked (never tried: a delayed job that
// failed keeps its token), so the delayed tokens count exactly the jobs
// waiting for their instant, for every instance. A job due within the
// lead is held in the index's delayed set, so its start is to the local
// clock's precision, not the server's redelivery timer's; it takes no
// room of the window (a delayed job never holds up a ready one). Two
// seconds is well over the server's redelivery lateness and a fetch round
// trip. Once due a job is paced by the lane like any other; its max_wait
// counts from its instant (the intake computes its deadline so). NATS
// message schedules are not used: a stream with schedules refuses discard
// new.
//
// # Tries and the ledger
//
// A job's tries are its token's deliveries (NumDelivered) less the
// deliveries that were not tries: a delay's hand-back and a hand-back at a
// graceful stop (Close). Each is counted, before its nak is sent, in the
// ledger: bucket <StreamPrefix>_HANDBACKS (a NATS KV layout; key
// <window stream>.<token sequence>, value the count and the token's
// timestamp, so an entry of a deleted and recreated stream is never taken
// for a new token's). The fetcher reads it only for a token delivered
// more than once (never under the queue's lock), and the entry is deleted
// when the job leaves the stream. After a crash (kill -9) the tokens an
// instance held are delivered again and each counts one try: the
// conservative side, so a poison job that kills the daemon still ends in
// the dead letter after max_attempts. Only the window is exposed to that,
// not the backlog. A ledger that cannot be read or written counts the
// delivery as a try too.
//
// # Counts
//
// The queue plays queue.Counter from the streams, the same on every
// instance: per level, its subjects' counts in the queue's stream, less
// the delayed jobs (the window's delayed tokens of that level, and the
// jobs held until due); depth is the stream's count. Jobs in flight count
// until they leave the stream.
//
// # Failover
//
// Every token an instance holds (fetched, in flight, or with its ack
// held) is kept alive by one keep-alive goroutine per queue with a
// progress ack (InProgress) every AckWait/5, however long its delivery
// takes; the window bounds them. So AckWait (default 5 s, the default
// PinnedTTL) only measures how long the jobs of an instance that died or
// froze stay with it: the window stream hands their tokens to the next
// drainer once both AckWait and PinnedTTL have passed, plus one fetch
// wait. A frozen instance that wakes starts none of the jobs it still
// holds until a refresh has read who is pinned (thaw.go). A shorter AckWait than PinnedTTL gains nothing (the jobs wait for
// the pin anyway) and risks redelivering a live instance's jobs after a
// short NATS stall; a much longer one makes the held jobs wait for it.
// Each JetStream API request of the stream and consumer checks waits at
// most RequestTimeout and is tried again, so a request lost during a
// leader election costs a second, not the caller's whole deadline.
//
// # Dedupe records
//
// A stream forgets the id of a job it no longer holds when its server
// restarts, and its refusal names only the original's sequence. So each
// job with a Nats-Msg-Id also has a record, id → job id, in the bucket
// <StreamPrefix>_DEDUPE (stream KV_<StreamPrefix>_DEDUPE, a NATS KV
// layout: one value per key, max age ingress.dedupe_window, counted from
// the job's acceptance; the key is the id in base64url). The drain writes
// the record before the job leaves the stream (its delete) and lets the
// job leave only once the record is stored (its PubAck; the write has a
// Nats-Msg-Id of its own, shaper-record:<job id>, so one sent again is
// stored once); until then the stream answers a repeat itself. The write
// runs off the drain's path; while it is outstanding (a node restarting,
// a leader election, a dropped connection) the job's token is kept alive
// and holds its place in the window, so a store that cannot take records
// stops the drain after a window's worth of jobs. Close waits up to 2 s
// for outstanding writes and hands the tokens of the jobs still
// unrecorded back (nak): delivered again, never gone without their record.
//
// Each Store keeps the records of the window in memory (recordTable):
// Ensure loads them all through an ordered consumer and returns once it
// has (Queue.Ready reports ErrRecordsLoading until then), and the consumer
// then delivers each new record, a few milliseconds after it was written.
// Offer looks an id up there, a map lookup on the caller's goroutine: a
// hit is queue.ErrDuplicate with the original's job id, a miss is stored
// at once. Only while the table cannot answer a miss — not loaded yet,
// the connection dropped and the consumer has not caught up again, or
// records were dropped for MaxRecords — is the id looked up in the records
// stream (a direct get) in a goroutine per job, while the stores of a
// queue keep the order of Offer. A repeat the stream refuses is answered
// with the stored original's job id or its record's (read from the stream,
// each read tried again for up to 5 s, so a read lost in a leader
// election delays the answer rather than leave it without a job id), and
// with none (never another) when both are gone. A job without an id takes
// no lookup.
//
// Not covered: a repeat that reaches another instance within the few
// milliseconds between the record's write and its delivery there, when
// the server holding the queue's stream restarted in that same gap (the
// stream then no longer knows the id either): it is stored again.
//
// # Intake
//
// Queue.Offer sends the job to its stream at once and answers from that
// job's own PubAck: accepted only once the store acknowledged it, and as
// soon as it did. Stores are pipelined, not batched: a job does not wait
// for the PubAcks of those before it nor for a batch to fill, so under
// load many share a round trip (the connection writes what accumulated)
// and a lone producer's job waits for nothing. Each job is a message of
// its own, so the stream's refusal (max_msgs, max_bytes, a duplicate
// Nats-Msg-Id) or a store error answers that job alone; Offer does not
// use the server's batch publishes (an atomic batch is refused whole for
// one such job, a fast batch drops duplicates silently).
//
// A job offered without an ID is named by its place (name.go): its id is
// <epoch>-<seq>, the stream's creation instant (unix milliseconds, base
// 36, read from the stream's info when it is ensured) and the sequence
// its PubAck gives, and its message carries no Shaper-Job-Id. Find
// (queue.Finder) reads such a job by its sequence while it is stored, so
// the shaper's record of a waiting job needs no write of its own: intake
// stores one message per job. A job offered before its stream's epoch is
// known, or with an id of its own (a replayed dead letter), keeps its id
// in Shaper-Job-Id.
//
// The publisher (publish.go) keeps the Store's stores in one window:
// at most MaxPending (4096) await their PubAck; a store finding the
// window full waits stallWait (200 ms), then is refused; one without a
// PubAck after ackTimeout (10 s) is answered with an error, as are all in
// flight when the connection drops (their PubAcks went to the old one);
// a "no responders" answer (a stream electing its leader) is sent again
// after 250 ms, twice. It replaces nats.go's PublishMsgAsync, which per
// store allocates a future, arms a timer of its own and decodes the
// PubAck with encoding/json: here one reply subscription, one map, one
// timer armed for the oldest store, and the PubAck of a stored message
// read by hand (any other shape through encoding/json).
//
// # Atomic intake
//
// Queue.OfferAll (queue.Atomic) stores several jobs all or none: one
// atomic batch (nats-server 2.12+, ADR-50; the stream has allow_atomic,
// which ensure sets on a previous version's stream too), of at most
// MaxAtomic (1 000, the server's default max_batch_size) jobs. Its
// messages are the jobs as Offer encodes them, on the same subjects, with
// Nats-Batch-Id, Nats-Batch-Sequence and, on the last, Nats-Batch-Commit;
// they are sent in one burst, and only the commit has a reply subject:
// the server answers it, with one PubAck for the batch (the last
// sequence, the count) or one refusal. The server stages the messages
// and, at the commit, checks every bound (max_msgs, max_bytes, per
// subject, duplicates) for the whole batch and stores it under sequences
// in a row, or stores nothing; a batch without its commit (a crash midway)
// is dropped after the server's batch timeout (10 s by default). The
// jobs are named and booked from the PubAck as Offer's are. A Nats-Msg-Id
// the table of records holds (or one repeated within the call) is
// answered as a duplicate and left out; a batch refused for an id the
// stream holds (its job is still queued, so it has no record yet) has its
// ids probed (atomicprobe.go) and is sent again without the duplicates,
// up to three times. The batch weighs on the publisher's window as that
// many single stores do.
//
// # Rooms
//
// Each role has its own type and files: the layout (subjects.go,
// stream.go, codec.go); job names and Find (name.go); intake, stores pipelined (publish.go, order.go,
// Store.publish in store.go), atomic batches (atomic.go, atomicprobe.go); the window: its stream, consumer and tokens
// (window.go), the fetcher, refresh and keep-alive (drain.go), a token's
// admission and hand-backs (fetched.go), acks held and retries (settle.go,
// retryroom.go), a job leaving its stream (recordwrite.go); the order
// index (index.go); the promoter and its reads (promote.go, read.go);
// dedupe records (record.go, table.go, watch.go); the hand-back ledger
// (ledger.go); counts (counts.go, depth.go). Queue holds the roles'
// state under one mutex: holdings (the window's jobs held here), promoter
// and counts.
//
// # Dead letters
//
// The dead-letter streams are package shaper/deadletter's; a failed or
// expired job is termed only after its dead letter was taken.
//
// Stream settings that cannot be changed safely (retention, storage,
// replicas, subjects, discard) are compared with an existing stream and
// reported as ErrIncompatible, never changed; MaxMsgs, MaxMsgSize and the
// duplicate window follow the config.
package jetstream
