package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/shaperd/shaper/cmd/shaperd/admin"
	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/deadletter"
	"github.com/shaperd/shaper/shaper/dedupe"
	"github.com/shaperd/shaper/shaper/metrics"
	"github.com/shaperd/shaper/shaper/service"
	"github.com/shaperd/shaper/shaper/tracing"
)

// maxDedupeIDs caps the Nats-Msg-Id table (about 100 B per entry).
const maxDedupeIDs = 1 << 20

// Options are the daemon's dependencies. The zero value is usable.
type Options struct {
	Logger   *slog.Logger         // nil: slog.Default()
	Registry *prometheus.Registry // nil: a fresh registry with the go_* and process_* series (never the global one)
	// HistoryInterval is how often the status page's history samples the
	// downstreams; 0: admin.DefaultHistoryInterval (2s). Tests shorten it.
	HistoryInterval time.Duration
	// NoConfigFile says shaperd runs without a config file (no -config):
	// a SIGHUP has no file to read, so the hint for adding a downstream is
	// a restart with one.
	NoConfigFile bool
	// Getenv reads the OpenTelemetry environment (tracing.go); nil:
	// os.Getenv. Tests set their own.
	Getenv func(string) string
}

// Daemon is one shaperd. Create it with New, start it with Run.
type Daemon struct {
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *daemonMetrics
	jobs    *metrics.Metrics
	deadMet *deadletter.Metrics
	dedupe  *dedupe.Table[shaper.Receipt]
	history *admin.History
	replays *deadletter.Replays // dead-letter replayers

	mu  sync.Mutex // guards cfg and serialises Reload
	cfg config.Config
	// noFile: started without a config file (Options.NoConfigFile).
	noFile bool
	getenv func(string) string  // Options.Getenv
	tp     trace.TracerProvider // nil: tracing off (tracing.go)

	view atomic.Pointer[view] // what intake reads on every message

	ready    chan struct{}
	wired    atomic.Pointer[wiring] // what Run's steps have built so far; nil before
	durable  readiness              // each durable queue, for /readyz and reloads
	shares   storeShares
	running  atomic.Bool
	intakeUp atomic.Bool // intake subscription confirmed by the server (see connectOptions)
}

// view is the part of the config that intake reads per message; it is
// replaced whole on reload.
type view struct {
	limits intakeLimits
	known  map[string]string // downstream → dead-letter subject
}

// New prepares a daemon. It starts nothing.
func New(cfg config.Config, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = newRegistry()
	}
	d := &Daemon{
		log:     opts.Logger,
		reg:     opts.Registry,
		metrics: newDaemonMetrics(opts.Registry),
		jobs:    shaper.NewMetrics(opts.Registry),
		deadMet: deadletter.NewMetrics(opts.Registry),
		cfg:     cfg,
		noFile:  opts.NoConfigFile, getenv: opts.Getenv,
		ready: make(chan struct{}),
	}
	d.dedupe = dedupe.New(dedupe.Settings{Window: cfg.Ingress.DedupeWindow, MaxIDs: maxDedupeIDs, OnEvict: d.metrics.dedupeEvicted.Inc},
		func(rc shaper.Receipt) (string, bool) { return rc.JobID, rc.Accepted })
	d.history = admin.NewHistory(opts.HistoryInterval, d.metrics.achievedRate)
	d.replays = deadletter.NewReplays(d.deadMet, opts.Logger)
	for name := range cfg.Downstreams { // every series exists from the start
		d.metrics.achievedRate.WithLabelValues(name).Set(0)
		d.deadMet.Labels([]string{name}, nil)
		d.deadMet.ForDownstreams([]string{name})
	}
	d.view.Store(newView(cfg))
	return d, nil
}

func newView(cfg config.Config) *view {
	v := &view{
		limits: intakeLimits{
			prefix:     cfg.Ingress.SubjectPrefix + ".",
			keyHeader:  cfg.Ingress.KeyHeader,
			maxPayload: int(cfg.Ingress.MaxPayload),
			bulk:       bulkLimits(cfg.Ingress.Bulk),
		},
		known: make(map[string]string, len(cfg.Downstreams)),
	}
	for name, ds := range cfg.Downstreams {
		v.known[name] = ds.DeadLetterSubject(name)
	}
	return v
}

// Ready is closed once NATS intake is subscribed and the admin API listens.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// AdminAddr is the admin listener's address (valid after Ready).
func (d *Daemon) AdminAddr() string { return d.live().adminAddr }

// live is what Run's steps have built so far (the zero wiring before).
func (d *Daemon) live() *wiring {
	if w := d.wired.Load(); w != nil {
		return w
	}
	return &wiring{}
}

// Registry is the registry the daemon's metrics are on.
func (d *Daemon) Registry() *prometheus.Registry { return d.reg }

// Run starts everything, serves until ctx is done, then shuts down in reverse
// order of start-up: intake first, the shaper (in-flight deliveries get
// shutdown_grace, queued jobs are dead-lettered), then NATS, then HTTP.
// It returns the first start-up error, or the joined shutdown errors.
func (d *Daemon) Run(ctx context.Context) (err error) {
	var services service.List
	defer func() { err = errors.Join(err, services.Stop()) }()
	w := &wiring{cfg: d.config()}
	for _, step := range d.steps() {
		svcs, err := step(ctx, w) // what a failed step started still stops
		if err := errors.Join(err, services.Start(ctx, svcs...)); err != nil {
			return err
		}
		snapshot := *w
		d.wired.Store(&snapshot)
	}
	d.announce(w.cfg, w.url)
	<-ctx.Done()
	d.running.Store(false)
	d.log.Info("shutting down: intake stopped, finishing in-flight deliveries", "grace", w.cfg.ShutdownGrace)
	return nil
}

// announce marks the daemon ready and says so in the log.
func (d *Daemon) announce(cfg config.Config, url string) {
	d.metrics.lastReloadSuccess.SetToCurrentTime()
	d.running.Store(true)
	close(d.ready)
	d.log.Info("shaperd ready", "nats", redactURL(url), "admin", d.AdminAddr(),
		"intake", cfg.Ingress.SubjectPrefix+".<downstream>", "downstreams", len(cfg.Downstreams))
	switch {
	case len(cfg.Downstreams) > 0:
	case d.noFile:
		d.log.Warn("no downstreams configured: every job will be rejected unknown_downstream; write a config file with one under downstreams: (see deploy/example.yaml) and restart shaperd with -config FILE")
	default:
		d.log.Warn("no downstreams configured: every job will be rejected unknown_downstream; add one under downstreams: in the config file (see deploy/example.yaml) and send SIGHUP")
	}
}

func (d *Daemon) config() config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// connect dials NATS. With RetryOnFailedConnect the connection object exists
// even while the server is unreachable; /readyz says so until it connects.
func (d *Daemon) connect(cfg config.Config, url string) (*nats.Conn, error) {
	opts, err := connectOptions(cfg.NATS, d.metrics, d.log, &d.intakeUp)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redactURL(url), err)
	}
	if !nc.IsConnected() {
		d.log.Warn("NATS not reachable yet; retrying in the background (/readyz is false until connected)", "url", redactURL(url))
	}
	return nc, nil
}

// subscribe starts intake on <prefix>.> in the queue group: one subscription,
// so messages are handled one at a time (the handler does no I/O but the reply).
func (d *Daemon) subscribe(nc *nats.Conn, sh *shaper.Shaper, cfg config.Config, rejected *deadletter.Rejected) ([]*nats.Subscription, error) {
	in := &intake{
		tracer:  tracing.Tracer(d.tp),
		limits:  func() intakeLimits { return d.view.Load().limits },
		known:   d.known,
		shaper:  sh,
		jobs:    d.jobs,
		metrics: d.metrics,
		dedupe:  d.dedupe,
		dead:    rejected,
		nc:      nc,
		log:     d.log,
	}
	subject := cfg.Ingress.SubjectPrefix + ".>"
	sub, err := nc.QueueSubscribe(subject, cfg.Ingress.QueueGroup, in.handle)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	subs := []*nats.Subscription{sub}
	if b := cfg.Ingress.Bulk; b.On() {
		bsub, err := d.subscribeBulk(nc, in, cfg)
		if err != nil {
			_ = sub.Unsubscribe()
			return nil, err
		}
		subs = append(subs, bsub)
	}
	// Bound what may wait in the client: past it NATS drops and counts
	// (shaper_intake_slow_consumer_dropped_total), it never grows unbounded.
	if err := sub.SetPendingLimits(65536, 256<<20); err != nil {
		return nil, fmt.Errorf("subscription limits: %w", err)
	}
	d.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "shaper_intake_slow_consumer_dropped_total",
		Help: "Intake messages NATS dropped before the daemon read them (slow consumer); their producers got no reply.",
	}, func() float64 { n, _ := sub.Dropped(); return float64(n) }))
	// Confirm the subscription when connected. Offline (or if the connection
	// drops now) the client sends it on connect, so this is never fatal, and
	// offline a Flush would only wait out its timeout.
	if nc.IsConnected() {
		if err := nc.Flush(); err != nil {
			d.log.Warn("intake subscription not confirmed yet; the client resends it on reconnect", "subject", subject, "err", err)
		} else {
			d.intakeUp.Store(true)
		}
	}
	return subs, nil
}

func (d *Daemon) known(name string) (string, bool) {
	dl, ok := d.view.Load().known[name]
	return dl, ok
}

// drainSubscription stops intake: messages already delivered to the client
// are still handled (and answered), then the subscription closes. It waits
// for that close (at most wait, and at least a second), or for nc to close,
// which ends the subscription's handling too.
func drainSubscription(nc *nats.Conn, sub *nats.Subscription, wait time.Duration) error {
	// Listen before draining, so that no close is missed.
	subClosed := sub.StatusChanged(nats.SubscriptionClosed)
	connClosed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(connClosed)
	if err := sub.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		return fmt.Errorf("drain intake: %w", err)
	}
	if nc.IsClosed() { // closed before connClosed listened
		return nil
	}
	t := time.NewTimer(max(wait, time.Second))
	defer t.Stop()
	select {
	case <-subClosed:
	case <-connClosed:
	case <-t.C:
	}
	return nil
}

// closeNATS flushes what the shaper published (dead letters, replies) and closes.
func closeNATS(nc *nats.Conn) error {
	var err error
	if nc.IsConnected() {
		if ferr := nc.FlushTimeout(5 * time.Second); ferr != nil {
			err = fmt.Errorf("flush NATS: %w", ferr)
		}
	}
	nc.Close()
	return err
}

// redactURL hides a password or token in a NATS URL before it is logged.
func redactURL(u string) string {
	p, err := neturl.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, has := p.User.Password(); has {
		p.User = neturl.UserPassword(p.User.Username(), "redacted")
	} else {
		p.User = neturl.User("redacted")
	}
	return p.String()
}
