package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
)

// startAdmin serves /metrics, /healthz, /readyz, /v1 and the status page on
// cfg.Listen, over TLS and behind basic auth when configured. The server
// has every timeout set, so slow clients cannot hold connections forever.
func (d *Daemon) startAdmin(cfg config.Admin) (func() error, error) {
	tlsCfg, err := adminTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	ln, err := listen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	d.adminAddr.Store(ln.Addr().String())
	warnExposure(d.log, cfg)
	var handler http.Handler = d.adminMux()
	if cfg.BasicAuth.Username != "" {
		handler = newBasicAuth(cfg.BasicAuth, d.log, "/healthz", "/readyz").wrap(handler)
	}
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn), // e.g. TLS handshake errors
	}
	done := make(chan error, 1)
	go func() {
		var err error
		if tlsCfg != nil {
			err = srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		return errors.Join(err, <-done)
	}
	return stop, nil
}

func (d *Daemon) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", d.handleReady)
	mux.HandleFunc("GET /v1/downstreams", d.handleDownstreams)
	mux.Handle("POST /v1/downstreams/{name}/pause", limitBody(d.handlePause(true)))
	mux.Handle("POST /v1/downstreams/{name}/resume", limitBody(d.handlePause(false)))
	mux.HandleFunc("GET /v1/history", d.handleHistory)
	mux.HandleFunc("GET /{$}", d.handleStatusPage)
	return mux
}

// handleReady is 200 when NATS is connected, the shaper runs and every
// configured durable queue's stream and consumer are in place, else 503 with
// the reasons.
func (d *Daemon) handleReady(w http.ResponseWriter, _ *http.Request) {
	var problems []string
	if nc := d.nc.Load(); nc == nil || !nc.IsConnected() {
		problems = append(problems, "NATS not connected")
	} else if !d.intakeUp.Load() {
		problems = append(problems, "intake subscription not confirmed by NATS yet")
	}
	if !d.running.Load() {
		problems = append(problems, "not running (starting or shutting down)")
	}
	problems = append(problems, d.queueProblems()...)
	if len(problems) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unready", "problems": problems})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (d *Daemon) handleDownstreams(w http.ResponseWriter, _ *http.Request) {
	sh := d.shaper.Load()
	if sh == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "starting"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"downstreams": sh.Lanes()})
}

func (d *Daemon) handlePause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		sh := d.shaper.Load()
		if sh == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "starting"})
			return
		}
		op, verb := sh.Resume, "resumed"
		if pause {
			op, verb = sh.Pause, "paused"
		}
		if err := op(name); err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, shaper.ErrUnknownDownstream) {
				status = http.StatusNotFound
				err = fmt.Errorf("no downstream named %q; GET /v1/downstreams lists them", name)
			}
			writeJSON(w, status, map[string]string{"error": err.Error()})
			return
		}
		d.log.Info("downstream "+verb+" through the admin API", "downstream", name)
		writeJSON(w, http.StatusOK, map[string]string{"downstream": name, "status": verb})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may have gone; nothing to do
}

// queueProblems lists the configured downstreams whose durable queue is not
// ready (stream missing, incompatible, or NATS not reached yet), sorted.
func (d *Daemon) queueProblems() []string {
	var problems []string
	for name := range d.view.Load().known {
		q, ok := d.durable.Load(name)
		if !ok {
			continue // a memory queue: always ready
		}
		if err := q.(interface{ Ready() error }).Ready(); err != nil {
			problems = append(problems, fmt.Sprintf("queue %s: %v", name, err))
		}
	}
	slices.Sort(problems)
	return problems
}
