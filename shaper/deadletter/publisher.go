package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/sink"
)

// Publisher is the shaper's and intake's shaper.DeadLetterer: it stores
// each dead letter in its downstream's dead-letter stream (the message
// reaches the subject's subscribers as well), or, when the NATS server has
// no JetStream, publishes it to the subject only. Safe for concurrent use.
type Publisher struct {
	store *Store
	core  *sink.DeadLetters
	log   *slog.Logger
	// coreOnly is set once the server is known to have no JetStream.
	coreOnly atomic.Bool
	// mayFallBack: no durable queue is configured, so a store that finds
	// no JetStream means there is none (with durable queues, JetStream must
	// be there, and a refusal is retried rather than published unkept).
	mayFallBack bool
	once        sync.Once
}

// PublisherSettings configure NewPublisher.
type PublisherSettings struct {
	// Streams are the dead-letter streams of every configured downstream.
	Streams []StreamSettings
	// Durable is set when a downstream keeps its queue in JetStream: then
	// JetStream must be there, and a store that finds none is retried,
	// never replaced by an unkept publish.
	Durable bool
	// EnsureWithin bounds the start-up check of the streams.
	EnsureWithin time.Duration
	Logger       *slog.Logger // nil = discard
	// EnsureTry bounds one try of the start-up check: a try that fails
	// (say, a request lost while a cluster elects a leader) is made again
	// after a short pause, each given twice as long as the last (at most 4
	// × EnsureTry), until EnsureWithin has passed. 0: one try.
	EnsureTry time.Duration
}

// NewPublisher prepares the dead-letter streams of every downstream on
// store. While NATS is reachable it ensures them now: an incompatible
// stream is an error wrapping ErrIncompatible (start-up stops); a server
// without JetStream (and no durable queue) means dead letters are only
// published. Otherwise each stream is made when its first dead letter
// comes.
func NewPublisher(ctx context.Context, nc *nats.Conn, store *Store, s PublisherSettings) (*Publisher, error) {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{store: store, core: &sink.DeadLetters{NC: nc}, log: s.Logger, mayFallBack: !s.Durable}
	if err := store.Register(s.Streams); err != nil {
		return nil, err
	}
	if nc.IsConnected() && len(s.Streams) > 0 {
		err := ensureAtStart(ctx, store, s)
		switch {
		case errors.Is(err, ErrIncompatible):
			return nil, fmt.Errorf("dead-letter store: %w", err)
		case errors.Is(err, ErrNoJetStream) && p.mayFallBack:
			p.noJetStream(err)
		case err != nil:
			p.log.Warn("dead-letter streams not ready yet; each is made when its first dead letter comes", "error", err.Error())
		}
	}
	return p, nil
}

// ensureAtStart is NewPublisher's check of the streams, tried as
// s.EnsureTry says until one try succeeds or finds no JetStream or an
// incompatible stream; it returns the last try's error.
func ensureAtStart(ctx context.Context, store *Store, s PublisherSettings) error {
	ctx, cancel := context.WithTimeout(ctx, s.EnsureWithin)
	defer cancel()
	if s.EnsureTry <= 0 {
		return store.Ensure(ctx, s.Streams)
	}
	try, pause := s.EnsureTry, 50*time.Millisecond
	for {
		tctx, tcancel := context.WithTimeout(ctx, try)
		err := store.Ensure(tctx, s.Streams)
		tcancel()
		if err == nil || errors.Is(err, ErrIncompatible) || errors.Is(err, ErrNoJetStream) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		try, pause = min(2*try, 4*s.EnsureTry), min(2*pause, 500*time.Millisecond)
	}
}

// PublishOnly reports whether the server was found to have no JetStream:
// dead letters are then only published, and there is no store to list or
// replay.
func (p *Publisher) PublishOnly() bool { return p.coreOnly.Load() }

// DeadLetter stores dl and returns its sequence in the store, or
// publishes it without JetStream (sequence 0).
func (p *Publisher) DeadLetter(ctx context.Context, dl shaper.DeadLetter) (uint64, error) {
	if p.coreOnly.Load() {
		return p.core.DeadLetter(ctx, dl)
	}
	seq, err := p.store.Put(ctx, dl.Job.Downstream, sink.DeadLetterMsg(dl))
	if err != nil && p.mayFallBack && errors.Is(err, ErrNoJetStream) {
		p.noJetStream(err)
		return p.core.DeadLetter(ctx, dl)
	}
	return seq, err
}

// noJetStream switches to publishing, saying so once.
func (p *Publisher) noJetStream(err error) {
	p.coreOnly.Store(true)
	p.once.Do(func() {
		p.log.Warn("the NATS server has no JetStream: dead letters are published to their subjects but not stored; "+
			"they are lost if nobody subscribes", "error", err.Error())
	})
}

// Reconfigure applies set to store (a reload): new downstreams get their
// stream, limits and subjects change in place. While NATS is not connected
// only the settings are recorded; a failure is logged, and the store tries
// again when a dead letter comes.
func Reconfigure(store *Store, set []StreamSettings, within time.Duration) {
	if err := store.Register(set); err != nil {
		store.log.Error("dead-letter settings refused", "error", err.Error())
		return
	}
	if !store.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := store.Ensure(ctx, set); err != nil {
		store.log.Error("dead-letter streams not updated to the reloaded config; retried when a dead letter comes", "error", err.Error())
	}
}
