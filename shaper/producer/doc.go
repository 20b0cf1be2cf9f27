// Package producer provides a Go client for submitting jobs to shaperd over
// NATS: the job protocol (subjects, headers and replies) with
// typed options for its headers, a typed Result for its replies, errors per
// rejection reason, and a submit that waits out Retry-After.
//
// It imports only nats.go and the standard library.
//
// # Submitting a job
//
// A job for downstream D is a request on <prefix>.D (default prefix
// shaper.jobs); the payload is passed on to the downstream untouched:
//
//	nc, err := nats.Connect(nats.DefaultURL)
//	if err != nil {
//		return err
//	}
//	defer nc.Close()
//
//	res, err := producer.Submit(ctx, nc, "printer", []byte(`{"doc":42}`),
//		producer.Key("acme"), producer.MaxWait(30*time.Second))
//	if err != nil {
//		return err
//	}
//	fmt.Println("queued at", res.Position, "starts in about", res.ETA)
//
// # Rejections
//
// A rejected job returns a *RejectedError that matches its reason's
// sentinel, and ErrRejected, under errors.Is:
//
//	_, err := producer.Submit(ctx, nc, "printer", payload)
//	switch {
//	case errors.Is(err, producer.ErrQueueFull), errors.Is(err, producer.ErrRateLimited):
//		// wait and retry: see SubmitRetry
//	case errors.Is(err, producer.ErrRejected):
//		// final: unknown_downstream, payload_too_large, bad_request
//	case err != nil:
//		// transport: nats.ErrNoResponders, nats.ErrTimeout, the context's
//	}
//
// errors.As gives the reply itself (Result.RetryAfter, Result.ErrorText).
//
// # Retrying
//
// SubmitRetry retries while waiting helps, waiting out Retry-After (capped
// by MaxRetryWait, jittered) and backing off on timeouts and no responders,
// all under the context. It sets a Nats-Msg-Id when none is given, so a
// retry after a lost reply is answered as a duplicate, not queued twice:
//
//	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
//	defer cancel()
//	res, err := producer.SubmitRetry(ctx, nc, "printer", payload, producer.Key("acme"))
//
// # Clients
//
// The package functions use shaperd's defaults. When the daemon's
// ingress.subject_prefix or ingress.key_header differ, create a Client:
//
//	c, err := producer.New(nc, producer.SubjectPrefix("jobs"), producer.KeyHeader("X-Tenant"))
//	...
//	res, err := c.SubmitRetry(ctx, "printer", payload, producer.Key("acme"))
//
// A Client is safe for concurrent use, owns no goroutines and never closes
// the connection. Options are functions applied in order, as in nats.go.
package producer
