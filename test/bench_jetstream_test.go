package test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkIntakeBackends compares accepted requests/s, 64 in flight, of
// the daemon with the jetstream backend, with the memory backend, and of a
// bare JetStream publish (js.Publish, 64 goroutines) to a stream with the
// same settings (file, work queue, discard new, duplicate window). The
// target: jetstream ≥ 0.5 × bare-jetstream-publish.
//
//	go test ./test -run '^$' -bench BenchmarkIntakeBackends -benchtime 20000x -count 3
func BenchmarkIntakeBackends(b *testing.B) {
	srv := runNATS(b)
	conf := func(backend string) string {
		return `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
downstreams:
  slow:
    rate: 1/s
    queue: { capacity: 1000000, backend: ` + backend + ` }
    sink:
      nats: { subject: bench.sink }
`
	}
	accepted := func(m *nats.Msg) bool { return m.Header.Get("Shaper-Status") == "accepted" }

	b.Run("memory", func(b *testing.B) {
		in := startDaemon(b, srv, conf("memory"))
		benchRequests(b, in.nc, "shaper.jobs.slow", accepted)
	})
	b.Run("jetstream", func(b *testing.B) {
		in := startDaemon(b, srv, conf("jetstream"))
		benchRequests(b, in.nc, "shaper.jobs.slow", accepted)
		in.stop(b)
		deleteStream(b, in.nc, "SHAPER_slow")
	})
	// Every job with a Nats-Msg-Id of its own: the intake's cost of dedupe
	// exact across instances and restarts (a lookup before the store, a
	// record after it, before the reply).
	b.Run("jetstream-msgid", func(b *testing.B) {
		in := startDaemon(b, srv, conf("jetstream"))
		benchRequestsMsgID(b, in.nc, "shaper.jobs.slow", accepted)
		in.stop(b)
		deleteStream(b, in.nc, "SHAPER_slow")
	})
	b.Run("bare-jetstream-publish", func(b *testing.B) {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "BARE", Subjects: []string{"bare.q"}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, MaxMsgs: 1000000, Discard: jetstream.DiscardNew,
			Duplicates: 2 * time.Minute,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer deleteStream(b, nc, "BARE")
		payload := make([]byte, 128)
		benchLoop(b, func() bool {
			_, err := js.Publish(ctx, "bare.q", payload)
			return err == nil
		})
	})
}

func deleteStream(b testing.TB, nc *nats.Conn, name string) {
	js, err := jetstream.New(nc)
	if err == nil {
		_ = js.DeleteStream(context.Background(), name)
	}
}

// benchRequests sends b.N requests, inFlight outstanding, and reports
// accepted/s.
func benchRequests(b *testing.B, nc *nats.Conn, subject string, ok func(*nats.Msg) bool) {
	payload := make([]byte, 128)
	benchLoop(b, func() bool {
		m, err := nc.Request(subject, payload, 10*time.Second)
		return err == nil && ok(m)
	})
}

// benchRequestsMsgID is benchRequests with a unique Nats-Msg-Id on every
// request.
func benchRequestsMsgID(b *testing.B, nc *nats.Conn, subject string, ok func(*nats.Msg) bool) {
	payload := make([]byte, 128)
	var seq atomic.Int64
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	benchLoop(b, func() bool {
		m := nats.NewMsg(subject)
		m.Data = payload
		m.Header.Set("Nats-Msg-Id", run+"-"+strconv.FormatInt(seq.Add(1), 10))
		r, err := nc.RequestMsg(m, 10*time.Second)
		return err == nil && ok(r)
	})
}

// benchLoop runs one b.N times from inFlight goroutines and reports the
// successful calls per second.
func benchLoop(b *testing.B, one func() bool) {
	b.ReportAllocs()
	var next, okN atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range inFlight {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if one() {
					okN.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if okN.Load() != int64(b.N) {
		b.Fatalf("%d of %d succeeded", okN.Load(), b.N)
	}
	b.ReportMetric(float64(okN.Load())/elapsed.Seconds(), "accepted/s")
}
