package producer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/shaper/producer"
)

func ExampleSubmit() {
	d := exampleShaperd(lane("printer", "10/s", "capacity: 10", ""))
	defer d.stop()

	nc, err := nats.Connect(d.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	res, err := producer.Submit(context.Background(), nc, "printer", []byte(`{"doc":42}`),
		producer.Key("acme"), producer.MaxWait(30*time.Second), producer.ContentType("application/json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("accepted:", res.Accepted, "at position", res.Position)
	// Output: accepted: true at position 1
}

// Three jobs in one bulk request, each taken as if it had been sent
// alone: the printer's queue holds two, so the third is refused.
func ExampleSubmitBulk() {
	d := exampleShaperd(lane("printer", "10/s", "capacity: 2", ""))
	defer d.stop()

	nc, err := nats.Connect(d.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	jobs := []producer.BulkJob{
		producer.JSONJob([]byte(`{"order": 1}`)),                         // sent as written
		producer.JSONJob([]byte(`{"order": 2}`), producer.Key("globex")), // its own key
		producer.BytesJob([]byte{0xff, 0x00}),                            // any bytes
	}
	res, err := producer.SubmitBulk(context.Background(), nc, "printer", jobs, producer.Key("acme"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Accepted, "accepted,", res.Rejected, "rejected")
	for _, j := range res.Jobs {
		if j.Accepted {
			fmt.Println(j.Index, "accepted, with a job id:", j.JobID != "")
		} else {
			fmt.Println(j.Index, "rejected", j.Reason)
		}
	}
	// Output:
	// partial 2 accepted, 1 rejected
	// 0 accepted, with a job id: true
	// 1 accepted, with a job id: true
	// 2 rejected queue_full
}

func ExampleClient_SubmitRetry() {
	// erp admits one job per key every two seconds.
	d := exampleShaperd(lane("erp", "10/s", "capacity: 10", "    admission: { mode: token_bucket, rate: 0.5/s, burst: 1 }\n"))
	defer d.stop()
	nc, err := nats.Connect(d.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	c, err := producer.New(nc, producer.Timeout(2*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = c.Submit(ctx, "erp", []byte("order 1"), producer.Key("acme")) // takes acme's token

	res, err := c.SubmitRetry(ctx, "erp", []byte("order 2"), producer.Key("acme"),
		producer.OnRetry(func(r producer.Retry) {
			fmt.Println("attempt", r.Attempt, "rate limited:", errors.Is(r.Err, producer.ErrRateLimited))
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("accepted:", res.Accepted)
	// Output:
	// attempt 1 rate limited: true
	// accepted: true
}

func ExampleRejectedError() {
	d := exampleShaperd(lane("printer", "10/s", "capacity: 10", ""))
	defer d.stop()
	nc, err := nats.Connect(d.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	_, err = producer.Submit(context.Background(), nc, "scanner", []byte("page 1"))
	fmt.Println(errors.Is(err, producer.ErrUnknownDownstream), errors.Is(err, producer.ErrRejected))

	var rej *producer.RejectedError
	if errors.As(err, &rej) {
		fmt.Printf("reason %s, retry after %s: %s\n", rej.Reason, rej.RetryAfter, rej.ErrorText)
	}
	// Output:
	// true true
	// reason unknown_downstream, retry after 0s: no downstream named "scanner" (configured: printer)
}

// exampleShaperd starts a daemon with the given downstream blocks for an
// example, or panics: an example has no *testing.T to fail.
func exampleShaperd(lanes ...string) *shaperd {
	d, err := startShaperd(daemonConfig(lanes...), nil)
	if err != nil {
		panic(err)
	}
	return d
}
