// Package producer provides a Go client for submitting jobs to shaperd over
// NATS: the job protocol (subjects, headers and replies) with
// typed options for its headers, a typed Result for its replies, errors per
// rejection reason, a submit that waits out Retry-After, bulk requests (many
// jobs in one), and what became of a job: a submit that waits for its
// outcome, and the status look-up.
//
// It imports only nats.go, the standard library and shaper/outcome (the
// record type, itself the standard library only).
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
// # Waiting for the outcome
//
// SubmitAndWait sends a job and returns once it has ended (succeeded,
// failed, expired or dropped), with the downstream's answer: status code,
// Content-Type and body. It has no timeout of its own for the outcome, so
// give the context one:
//
//	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
//	defer cancel()
//	o, err := producer.SubmitAndWait(ctx, nc, "pay", payload, producer.MsgID("order-42"))
//	switch {
//	case err != nil:
//		return err // a rejection (o.Accepted says why), or ctx ended: o.State is the last seen
//	case o.State != outcome.Succeeded:
//		return fmt.Errorf("job %s %s after %d tries: %s", o.JobID, o.State, o.Attempt, o.Error)
//	}
//	fmt.Printf("%d %s in %s: %s\n", o.StatusCode, o.ContentType, o.Latency, o.Body)
//
// ReplyTo asks for the outcome on a subject of your own instead (a worker
// that handles outcomes apart from the submits); Status looks a job up at
// any time, by downstream and job id, and answers state outcome.Unknown
// for an id shaperd has no record of.
//
// # Bulk requests
//
// SubmitBulk sends many jobs in one request on <bulk prefix>.D (default
// prefix shaper.bulk), each taken as if sent alone, and returns one answer
// per job with the totals. A JSONJob's data reaches the downstream as
// written, a BytesJob's may be any bytes; a job's options are its own
// headers, the request's the defaults of every job, and Atomic makes the
// request all or nothing. SubmitBulkRetry sends again only the jobs
// rejected with a Retry-After, once the longest has passed:
//
//	jobs := []producer.BulkJob{
//		producer.JSONJob([]byte(`{"doc":1}`), producer.Key("acme")),
//		producer.BytesJob(pdf, producer.Key("globex"), producer.MsgID("o-17")),
//	}
//	res, err := producer.SubmitBulkRetry(ctx, nc, "printer", jobs, producer.MaxWait(time.Minute))
//	if err != nil {
//		return err // rejected whole (a *RejectedError), or no answer
//	}
//	for _, j := range res.Jobs {
//		if err := j.Err(); err != nil {
//			log.Printf("job %d: %v", j.Index, err)
//		}
//	}
//
// # Clients
//
// The package functions use shaperd's defaults. When the daemon's
// ingress.subject_prefix, ingress.status_prefix, ingress.bulk.subject_prefix
// or ingress.key_header differ, create a Client:
//
//	c, err := producer.New(nc, producer.SubjectPrefix("jobs"), producer.KeyHeader("X-Tenant"))
//	...
//	res, err := c.SubmitRetry(ctx, "printer", payload, producer.Key("acme"))
//
// A Client is safe for concurrent use, owns no goroutines and never closes
// the connection. Options are functions applied in order, as in nats.go.
package producer
