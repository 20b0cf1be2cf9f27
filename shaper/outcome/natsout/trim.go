package natsout

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Trimming the finished records: past trimAbove of its room a
// downstream's finished records are trimmed, the oldest first, to about
// trimTo of it, at most once every trimEvery.
const (
	trimAbove = 0.9
	trimTo    = 0.8
	trimEvery = time.Second
)

// trim keeps downstream's finished records within their room, so that
// the server never has to discard them itself: when they fill more than
// trimAbove of the stream's MaxBytes, the oldest are purged down to
// about trimTo, and Settings.Discarded is told how many went. It reads
// the stream's state at most once every trimEvery per downstream, and
// not at all for a downstream ensured with no room bound. A failure is
// logged: the records are stored, and the server's own bound still
// holds.
func (s *Store) trim(ctx context.Context, downstream string) {
	if !s.due(downstream) {
		return
	}
	st, err := s.stream(ctx, downstream, done)
	if err != nil || st == nil {
		return
	}
	info, err := st.Info(ctx)
	if err != nil {
		if errors.Is(err, natsjs.ErrStreamNotFound) {
			s.forget(downstream, done)
		}
		s.log.Warn("job records not trimmed to their room", "downstream", downstream,
			"stream", s.StreamName(downstream), "error", err.Error())
		return
	}
	n := excess(info.State.Msgs, info.State.Bytes, info.Config.MaxBytes)
	if n == 0 {
		return
	}
	purged, err := s.purge(ctx, info.Config.Name, info.State.Msgs-n)
	if err != nil {
		s.log.Warn("job records not trimmed to their room", "downstream", downstream,
			"stream", info.Config.Name, "error", err.Error())
		return
	}
	s.log.Debug("job records trimmed to their room", "downstream", downstream, "stream", info.Config.Name,
		"discarded", purged, "room", info.Config.MaxBytes)
	if purged > 0 && s.set.Discarded != nil {
		s.set.Discarded(downstream, purged)
	}
}

// due reports whether downstream's finished records are to be measured
// now, and if so books it.
func (s *Store) due(downstream string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lane(downstream)
	if l.ensured && l.room == 0 {
		return false
	}
	now := s.now()
	if d := now.Sub(l.trimmed); !l.trimmed.IsZero() && d >= 0 && d < trimEvery {
		return false
	}
	l.trimmed = now
	return true
}

// excess is how many of msgs messages of bytes in all to purge, the
// oldest first, so that about trimTo of room remains, when they fill
// more than trimAbove of it (room <= 0: no bound, none).
func excess(msgs, bytes uint64, room int64) uint64 {
	if room <= 0 || msgs == 0 || bytes == 0 || float64(bytes) <= trimAbove*float64(room) {
		return 0
	}
	over := float64(bytes) - trimTo*float64(room)
	n := uint64(math.Ceil(over / (float64(bytes) / float64(msgs))))
	return min(n, msgs)
}

// purge removes all but the newest keep messages of stream and returns
// how many it removed. nats.go's Stream.Purge does not return that
// count, so this sends the API request itself, under the JetStream
// context's API prefix or domain.
func (s *Store) purge(ctx context.Context, stream string, keep uint64) (int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(s.js.Options().DefaultTimeout, 5*time.Second))
		defer cancel()
	}
	req, err := json.Marshal(struct {
		Keep uint64 `json:"keep,omitempty"`
	}{keep})
	if err != nil {
		return 0, err
	}
	subject := apiPrefix(s.js.Options()) + "STREAM.PURGE." + stream
	m, err := s.js.Conn().RequestWithContext(ctx, subject, req)
	if err != nil {
		return 0, fmt.Errorf("purge stream %s to its newest %d: %w", stream, keep, err)
	}
	var resp struct {
		Error   *natsjs.APIError `json:"error"`
		Success bool             `json:"success"`
		Purged  uint64           `json:"purged"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("purge stream %s: the answer %q is not the API's: %w", stream, m.Data, err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("purge stream %s to its newest %d: %w", stream, keep, resp.Error)
	}
	if !resp.Success {
		return 0, fmt.Errorf("purge stream %s to its newest %d: the server answered %q, without success", stream, keep, m.Data)
	}
	return int(resp.Purged), nil
}

// apiPrefix is the subject prefix of the JetStream API requests of a
// context with options o, ending in a dot.
func apiPrefix(o natsjs.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return natsjs.DefaultAPIPrefix
}
