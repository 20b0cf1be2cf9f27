package queue

// byteBound counts the payload bytes a memory kind holds against
// Settings.MaxBytes. The zero value holds nothing and has no bound.
type byteBound struct {
	held int64 // sum of len(Payload) of the held jobs, retries included
	max  int64 // 0 = no byte bound
}

// fits reports whether n more bytes fit under the bound.
func (b *byteBound) fits(n int) bool { return b.max <= 0 || b.held+int64(n) <= b.max }

func (b *byteBound) add(j *Job) { b.held += int64(len(j.Payload)) }
func (b *byteBound) sub(j *Job) { b.held -= int64(len(j.Payload)) }

// refuse is the error of an Offer whose job does not fit: ErrFull for the
// cost bound, ErrMaxBytes for the byte bound, nil when it fits.
func refuse(costFits bool, bytes *byteBound, j *Job) error {
	switch {
	case !costFits:
		return ErrFull
	case !bytes.fits(len(j.Payload)):
		return ErrMaxBytes
	}
	return nil
}
