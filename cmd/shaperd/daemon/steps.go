package daemon

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
	"github.com/shaperd/shaper/shaper/control"
	"github.com/shaperd/shaper/shaper/deadletter"
	"github.com/shaperd/shaper/shaper/outcome/natsout"
	"github.com/shaperd/shaper/shaper/service"
	"github.com/shaperd/shaper/shaper/sink"
	"github.com/shaperd/shaper/shaper/tracing"
)

// wiring is what Run's steps build, each from what the steps before it
// built.
type wiring struct {
	cfg       config.Config
	url       string // NATS, embedded or not
	adminAddr string // the admin listener's address
	nc        *nats.Conn
	queues    func(shaper.LaneSettings) (queue.Roles, error)
	dead      *deadletter.Publisher
	// deadStore is the dead-letter store; nil when the NATS server has no
	// JetStream (deadPublishOnly: dead letters are only published).
	deadStore       *deadletter.Store
	deadPublishOnly bool
	rejected        *deadletter.Rejected
	deps            shaper.Deps
	sh              *shaper.Shaper
	ctl             *control.Control // the admin API's changes (control.go)
	outcomes        *outcomes        // the job records (outcomes.go)
}

// step builds one part of the daemon into w and returns the services that
// run it, in the order they start (Run stops them in reverse).
type step func(ctx context.Context, w *wiring) ([]service.Service, error)

// steps is the daemon's start-up in order. Run stops what they started in
// reverse: intake first, replays, the status page's history, the shaper
// (in-flight deliveries get shutdown_grace, queued jobs are
// dead-lettered), runtime control, the admission stores, the dead-letter
// workers, NATS (flushed), the admin server, the embedded NATS server.
func (d *Daemon) steps() []step {
	return []step{
		d.natsServer, d.adminServer, d.natsConn, d.tracingStep, d.storageStep, d.deadWorkers,
		d.admissionStep, d.outcomesStep, d.shaperStep, d.statusStep, d.historyStep, d.replaysStep, d.intakeStep,
	}
}

// natsServer starts the embedded NATS server when no URL is configured.
func (d *Daemon) natsServer(_ context.Context, w *wiring) ([]service.Service, error) {
	if w.url = w.cfg.NATS.URL; w.url != "" {
		d.log.Info("NATS is remote: its JetStream store syncs to disk as its sync_interval says (the server's default 2m can lose acknowledged writes in a power failure; set sync_interval: always there for accepted = on disk)")
		return nil, nil
	}
	srv, err := startEmbedded(w.cfg, d.log)
	if err != nil {
		return nil, err
	}
	if jc := srv.JetStreamConfig(); jc != nil {
		d.shares.embedded.Store(jc.MaxStore)
	}
	w.url = srv.ClientURL()
	return []service.Service{&service.Funcs{StopFunc: func() error { srv.Shutdown(); srv.WaitForShutdown(); return nil }}}, nil
}

// adminServer starts the admin HTTP server (admin.go).
func (d *Daemon) adminServer(_ context.Context, w *wiring) ([]service.Service, error) {
	srv, err := d.startAdmin(w.cfg.Admin)
	if err != nil {
		return nil, err
	}
	w.adminAddr = srv.Addr()
	return []service.Service{&service.Funcs{StopFunc: srv.Stop}}, nil
}

// natsConn dials NATS; stopping it flushes what the shaper published.
func (d *Daemon) natsConn(_ context.Context, w *wiring) ([]service.Service, error) {
	nc, err := d.connect(w.cfg, w.url)
	if err != nil {
		return nil, err
	}
	w.nc = nc
	if b := w.cfg.Ingress.Bulk; b.On() && nc.IsConnected() && nc.MaxPayload() < int64(b.MaxBytes) {
		d.log.Warn("the NATS server's max_payload is below ingress.bulk.max_bytes: it refuses bulk requests larger than max_payload before shaperd sees them; raise max_payload on the server or lower ingress.bulk.max_bytes",
			"max_payload", nc.MaxPayload(), "ingress.bulk.max_bytes", int64(b.MaxBytes))
	}
	return []service.Service{&service.Funcs{StopFunc: func() error { return closeNATS(nc) }}}, nil
}

// storageStep prepares the durable queues and the dead-letter store;
// stopping it ends the dedupe records' watch, before NATS closes.
func (d *Daemon) storageStep(ctx context.Context, w *wiring) ([]service.Service, error) {
	st, err := d.storage(ctx, w)
	if st == nil {
		return nil, err
	}
	return []service.Service{&service.Funcs{StopFunc: st.Stop}}, err
}

// deadWorkers are the worker that stores rejected publishes' dead letters
// and, with a store, the refresh of its series. They stop after intake
// and the shaper, before NATS closes.
func (d *Daemon) deadWorkers(_ context.Context, w *wiring) ([]service.Service, error) {
	w.rejected = deadletter.NewRejected(w.dead, d.jobs, d.log)
	svcs := []service.Service{w.rejected}
	if w.deadStore != nil {
		svcs = append(svcs, d.deadMet.Refresher(w.deadStore, d.knownNames, d.log))
	}
	return svcs, nil
}

// admissionStep prepares the remote admission stores; they close after
// the shaper stopped, before NATS closes.
func (d *Daemon) admissionStep(ctx context.Context, w *wiring) ([]service.Service, error) {
	admitters, closeAdmission, err := d.admitters(ctx, w.cfg, w.nc)
	if err != nil {
		return nil, err
	}
	rates, err := newKVRates(w.nc, w.cfg.NATS.JetStream)
	if err != nil {
		return nil, err
	}
	w.deps = shaper.Deps{Sinks: sink.For(w.nc, d.tp), DeadLetter: w.dead, Metrics: d.jobs, Logger: d.log,
		Queues: w.queues, Admitters: admitters, Rates: rates, NewJobID: nuid.Next, Tracer: tracing.Tracer(d.tp)}
	return []service.Service{&service.Funcs{StopFunc: closeAdmission}}, nil
}

// shaperStep builds the shaper, then runtime control (control.go): kept
// pauses and overrides apply before the shaper starts anything.
func (d *Daemon) shaperStep(_ context.Context, w *wiring) ([]service.Service, error) {
	sh, err := shaper.New(w.cfg.ShaperSettings(), w.deps)
	if err != nil {
		return nil, fmt.Errorf("start shaper: %w", err)
	}
	w.sh = sh
	w.ctl = d.newControl(w.cfg, w.nc, sh)
	var runErr error
	run := &service.Loop{Run: func(ctx context.Context) { runErr = sh.Run(ctx) }}
	return []service.Service{
		w.ctl,
		&service.Funcs{StartFunc: run.Start, StopFunc: func() error { _ = run.Stop(); return runErr }},
	}, nil
}

// statusStep answers job status requests (docs/outcomes.md) from the
// shaper's records, on every instance.
func (d *Daemon) statusStep(_ context.Context, w *wiring) ([]service.Service, error) {
	r, err := natsout.NewResponder(w.nc, natsout.ResponderSettings{StatusPrefix: w.cfg.Ingress.StatusPrefix,
		Lookup: w.sh.Job, Logger: d.log})
	if err != nil {
		return nil, err
	}
	return []service.Service{r}, nil
}

// historyStep samples the downstreams for the status page.
func (d *Daemon) historyStep(_ context.Context, w *wiring) ([]service.Service, error) {
	return []service.Service{d.history.Sampler(w.sh.Lanes)}, nil
}

// replaysStep lets the dead-letter replayers run (deadletters.go).
func (d *Daemon) replaysStep(_ context.Context, w *wiring) ([]service.Service, error) {
	svc, err := d.replayService(w)
	if svc == nil || err != nil {
		return nil, err
	}
	return []service.Service{svc}, nil
}

// intakeStep subscribes intake; stopping it drains the subscription.
func (d *Daemon) intakeStep(_ context.Context, w *wiring) ([]service.Service, error) {
	subs, err := d.subscribe(w.nc, w.sh, w.cfg, w.rejected)
	if err != nil {
		return nil, err
	}
	nc, grace := w.nc, w.cfg.ShutdownGrace
	svcs := make([]service.Service, len(subs))
	for i, sub := range subs {
		svcs[i] = &service.Funcs{StopFunc: func() error { return drainSubscription(nc, sub, grace) }}
	}
	return svcs, nil
}
