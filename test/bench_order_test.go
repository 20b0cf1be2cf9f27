package test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// BenchmarkWhoGoesNext measures, on each backend, what priorities, delays
// and fairness promise under load, from outside (a real downstream over
// HTTP, jobs sent as a producer sends them):
//
//   - levels: 900 jobs sent at 150/s (1.5 × the drain rate of 100/s), 10 %
//     at priority 0, 30 % at 1, 60 % at 2; the wait from send to start, p50
//     and p99, per level.
//   - delay: 300 jobs with Shaper-Not-Before instants 10 ms apart, 1 to 4 s
//     ahead, drained at 1000/s; start − instant, p50, p99 and max.
//   - flood: one key floods 1000 jobs at once, then a quiet key sends 10
//     (one every 100 ms) while the flood drains at 200/s; the quiet key's
//     wait p50 and p99 under fairness: key, and under fairness: none in the
//     same run (the FIFO baseline), and their ratio.
//
// Each round is a few seconds of wall time, whatever b.N: run it with
//
//	go test ./test -run '^$' -bench BenchmarkWhoGoesNext -benchtime 1x -count 3
func BenchmarkWhoGoesNext(b *testing.B) {
	for _, backend := range []string{"memory", "jetstream"} {
		b.Run("backend="+backend, func(b *testing.B) {
			srv := runNATS(b)
			b.Run("levels", func(b *testing.B) { benchLevels(b, srv, backend) })
			b.Run("delay", func(b *testing.B) { benchDelay(b, srv, backend) })
			b.Run("flood", func(b *testing.B) { benchFlood(b, srv, backend) })
		})
	}
}

// orderLane is one downstream for the order benchmarks.
func orderLane(name, rate, backend, queue, url string) string {
	return `
nats: { url: "%NATS%" }
admin: { listen: "127.0.0.1:0" }
ingress: { subject_prefix: "order.` + name + `" }
shutdown_grace: 1s
downstreams:
  ` + name + `:
    rate: ` + rate + `
    concurrency: 64
    queue: { capacity: 5000, max_wait: 10m, backend: ` + backend + `, ` + queue + ` }
    sink:
      http: { url: "` + url + `", timeout: 5s }
`
}

// orderDaemon starts a daemon for one round on srv; its stream is deleted
// when the round ends.
func orderDaemon(b *testing.B, srv *server.Server, name, backend, yaml string) *instance {
	in := startDaemon(b, srv, yaml)
	b.Cleanup(func() {
		in.stop(b)
		if backend == "jetstream" {
			deleteStream(b, in.nc, "SHAPER_"+name)
		}
	})
	return in
}

// sendJob sends one job and fails the benchmark unless it is accepted.
func sendJob(b testing.TB, nc *nats.Conn, subject, body string, hdr ...string) {
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil || resp.Header.Get("Shaper-Status") != "accepted" {
		b.Errorf("job %s: %v %s", body, err, respData(resp))
	}
}

func respData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

// quantiles returns the p50, p99 and max of xs (seconds), sorting xs.
func quantiles(xs []float64) (p50, p99, top float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	at := func(q float64) float64 { return xs[min(len(xs)-1, int(q*float64(len(xs))))] }
	return at(0.5), at(0.99), xs[len(xs)-1]
}

// sentAt reads the send time a body "<tag>/<unix nanos>" carries.
func sentAt(body string) (tag string, at time.Time) {
	tag, ns, _ := strings.Cut(body, "/")
	n, _ := strconv.ParseInt(ns, 10, 64)
	return tag, time.Unix(0, n)
}

func benchLevels(b *testing.B, srv *server.Server, backend string) {
	const n, sendRate = 900, 150
	ds := newDownstream(b)
	in := orderDaemon(b, srv, "levels", backend, orderLane("levels", "100/s", backend, "priorities: 3", ds.URL))
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / sendRate)))
		p := 2
		switch i % 10 {
		case 0:
			p = 0
		case 1, 4, 7:
			p = 1
		}
		sendJob(b, in.nc, "order.levels.levels", fmt.Sprintf("%d/%d", p, time.Now().UnixNano()), "Shaper-Priority", strconv.Itoa(p))
	}
	waits := make([][]float64, 3)
	for _, h := range ds.waitHits(b, n, 60*time.Second) {
		tag, at := sentAt(h.body)
		p, _ := strconv.Atoi(tag)
		waits[p] = append(waits[p], h.at.Sub(at).Seconds())
	}
	for p, w := range waits {
		p50, p99, _ := quantiles(w)
		b.ReportMetric(p50*1000, fmt.Sprintf("p%d-wait-p50-ms", p))
		b.ReportMetric(p99*1000, fmt.Sprintf("p%d-wait-p99-ms", p))
	}
}

func benchDelay(b *testing.B, srv *server.Server, backend string) {
	const n = 300
	ds := newDownstream(b)
	in := orderDaemon(b, srv, "delay", backend, orderLane("delay", "1000/s", backend, "priorities: 1", ds.URL))
	first := time.Now().Add(time.Second)
	for i := range n {
		at := first.Add(time.Duration(i) * 10 * time.Millisecond)
		sendJob(b, in.nc, "order.delay.delay", fmt.Sprintf("%d/%d", i, at.UnixNano()), "Shaper-Not-Before", at.Format(time.RFC3339Nano))
	}
	var late []float64
	early := 0
	for _, h := range ds.waitHits(b, n, 60*time.Second) {
		_, at := sentAt(h.body)
		if h.at.Before(at) {
			early++
		}
		late = append(late, h.at.Sub(at).Seconds())
	}
	if early > 0 {
		b.Errorf("%d of %d delayed jobs started before their instant", early, n)
	}
	p50, p99, top := quantiles(late)
	b.ReportMetric(p50*1000, "late-p50-ms")
	b.ReportMetric(p99*1000, "late-p99-ms")
	b.ReportMetric(top*1000, "late-max-ms")
}

func benchFlood(b *testing.B, srv *server.Server, backend string) {
	quiet := func(fairness string) (p50, p99 float64) {
		const flood, few = 1000, 10
		name := "flood" + strings.ReplaceAll(fairness, "_", "")
		ds := newDownstream(b)
		in := orderDaemon(b, srv, name, backend, orderLane(name, "200/s", backend, "fairness: "+fairness, ds.URL))
		subject := "order." + name + "." + name
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < flood; i += 8 {
					sendJob(b, in.nc, subject, fmt.Sprintf("flood/%d", time.Now().UnixNano()), "Shaper-Key", "flood")
				}
			})
		}
		wg.Wait()
		for range few {
			sendJob(b, in.nc, subject, fmt.Sprintf("quiet/%d", time.Now().UnixNano()), "Shaper-Key", "quiet")
			time.Sleep(100 * time.Millisecond)
		}
		var waits []float64
		for _, h := range ds.waitHits(b, flood+few, 60*time.Second) {
			if tag, at := sentAt(h.body); tag == "quiet" {
				waits = append(waits, h.at.Sub(at).Seconds())
			}
		}
		p50, p99, _ = quantiles(waits)
		return p50, p99
	}
	fifo50, fifo99 := quiet("none")
	fair50, fair99 := quiet("key")
	b.ReportMetric(fair50*1000, "quiet-fair-p50-ms")
	b.ReportMetric(fair99*1000, "quiet-fair-p99-ms")
	b.ReportMetric(fifo50*1000, "quiet-fifo-p50-ms")
	b.ReportMetric(fifo99*1000, "quiet-fifo-p99-ms")
	b.ReportMetric(fair99/fifo99, "fair/fifo-p99")
}
