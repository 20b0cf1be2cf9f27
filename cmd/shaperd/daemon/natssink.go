package daemon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper"
)

// natsSink delivers jobs to a NATS subject, by publish or by request.
type natsSink struct {
	nc   *nats.Conn
	spec shaper.NATSSinkSpec
}

// Deliver publishes the job. With Request set, any reply within the timeout
// is success; a timeout or no responders is a retryable error.
func (s *natsSink) Deliver(ctx context.Context, job *shaper.Job) error {
	m := jobMsg(s.spec.Subject, job)
	m.Header.Set(hdrJobID, job.ID)
	m.Header.Set(hdrIdemKey, job.ID)
	m.Header.Set(hdrAttempt, strconv.Itoa(job.Attempt))
	if !s.spec.Request {
		if err := s.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("publish to %s: %w", s.spec.Subject, err)
		}
		return nil
	}
	timeout := s.spec.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := s.nc.RequestMsgWithContext(rctx, m); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no reply within %s", timeout)
		}
		return fmt.Errorf("request to %s: %w", s.spec.Subject, err)
	}
	return nil
}

// jobMsg is a message carrying a job's payload and pass-through headers.
func jobMsg(subject string, job *shaper.Job) *nats.Msg {
	m := nats.NewMsg(subject)
	for k, v := range job.Header {
		m.Header[k] = v
	}
	m.Data = job.Payload
	return m
}

// deadLetterer publishes dead letters to NATS: the original payload with
// Shaper-Reason and Shaper-Error headers.
type deadLetterer struct {
	nc *nats.Conn
}

func (d *deadLetterer) DeadLetter(_ context.Context, dl shaper.DeadLetter) error {
	m := jobMsg(dl.Subject, dl.Job)
	m.Header.Set(hdrReason, string(dl.Reason))
	m.Header.Set(hdrError, truncate(dl.Err, 1024))
	if dl.Job.ID != "" {
		m.Header.Set(hdrJobID, dl.Job.ID)
	}
	m.Header.Set("Shaper-Downstream", dl.Job.Downstream)
	if dl.Job.Attempt > 0 {
		m.Header.Set(hdrAttempt, strconv.Itoa(dl.Job.Attempt))
	}
	if err := d.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("dead-letter job %s to %s: %w", dl.Job.ID, dl.Subject, err)
	}
	return nil
}
