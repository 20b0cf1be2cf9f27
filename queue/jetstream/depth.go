package jetstream

// depthBook is a queue's count of the messages in its stream: the stream's
// count from the last refresh (StreamInfo, every refreshEvery), adjusted
// for this instance's stores (PubAcks) and removals (acks, terms) since.
//
// A refresh and the local adjustments race: a PubAck can arrive after a
// StreamInfo answer that already counted its message, and a store or an
// ack booked while the StreamInfo request is in flight is or is not in its
// answer. Counting every PubAck on top of the refreshed count is how a
// full stream of 200 read 201. The book orders the two by stream sequence:
// a PubAck's sequence at or below the refresh's LastSeq is in the
// refreshed count already and is not counted again; one above it is new.
// Removals booked while a refresh is in flight are applied on top of its
// answer, which is taken as not yet having seen them.
//
// What no sequence can settle: an ack sent just before a refresh request
// may reach the server's consumer after the StreamInfo answer was made (the
// server handles acks and API requests on separate queues), so that answer
// counts one message too many until the next refresh, 500 ms later.
// Messages stored, acked or expired by other instances are seen only by a
// refresh. Requires the queue's mutex.
type depthBook struct {
	n        int    // messages in the stream, best known
	lastSeq  uint64 // the last refresh's LastSeq: stores up to it are in n
	inFlight bool   // a refresh was begun and has not ended
	newer    []uint64
	removed  int // removals booked since begin
}

// begin is called just before a StreamInfo request is sent.
func (b *depthBook) begin() {
	b.inFlight = true
	b.newer = b.newer[:0]
	b.removed = 0
}

// end takes a StreamInfo answer (the stream's Msgs and LastSeq) begun with
// begin, and reports whether the count changed.
func (b *depthBook) end(msgs, lastSeq uint64) bool {
	n := int(msgs)
	for _, s := range b.newer {
		if s > lastSeq { // stored after the answer was made
			n++
		}
	}
	n = max(n-b.removed, 0)
	changed := n != b.n
	b.n, b.lastSeq = n, max(b.lastSeq, lastSeq)
	b.abort()
	return changed
}

// abort forgets a begun refresh that got no answer; the local count stands.
func (b *depthBook) abort() {
	b.inFlight = false
	b.newer = b.newer[:0]
	b.removed = 0
}

// stored books a PubAck of stream sequence seq.
func (b *depthBook) stored(seq uint64) {
	if seq != 0 && seq <= b.lastSeq {
		return // the last refresh counted it
	}
	b.n++
	if b.inFlight {
		b.newer = append(b.newer, seq)
	}
}

// remove books an ack or term of one of the stream's messages.
func (b *depthBook) remove() {
	b.n = max(b.n-1, 0)
	if b.inFlight {
		b.removed++
	}
}
