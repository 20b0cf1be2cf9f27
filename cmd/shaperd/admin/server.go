package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
	"github.com/shaperd/shaper/config"
	"github.com/shaperd/shaper/shaper"
)

// Downstreams is what the admin API reads and controls: the running
// shaper's lanes (a *shaper.Shaper). Its methods are called from HTTP
// handlers and the history sampler concurrently.
type Downstreams interface {
	// Lanes returns every downstream's status, sorted by name.
	Lanes() []shaper.LaneStatus
	// Pause stops a downstream's starts until until (zero: until Resume),
	// Resume starts them again; SetOverride sets the non-zero fields of o
	// over the downstream's configured values (keeping the others it
	// overrides), ClearOverride returns it to them. by names who asked, for
	// the audit log. For an unknown name each returns an error wrapping
	// shaper.ErrUnknownDownstream; SetOverride returns one wrapping
	// shaper.ErrInvalidOverride for values the downstream cannot run with.
	Pause(name string, until time.Time, by string) error
	Resume(name, by string) error
	SetOverride(name string, o shaper.Override, by string) error
	ClearOverride(name, by string) error
}

// Registry is what GET /metrics serves. promhttp also registers its own
// promhttp_metric_handler_errors_total on it. A *prometheus.Registry is one.
type Registry interface {
	prometheus.Gatherer
	prometheus.Registerer
}

// Deps are what the server reads. Every field but DeadStats and
// DeadLetters is required; the functions are called from HTTP handlers,
// concurrently.
type Deps struct {
	Logger   *slog.Logger
	Registry Registry
	// Downstreams returns the running shaper, or nil while there is none
	// yet (then /v1/downstreams and pause/resume answer 503 "starting" and
	// the status page lists no rows).
	Downstreams func() Downstreams
	// NotReady lists what keeps the daemon from being ready, for GET
	// /readyz; empty means ready.
	NotReady func() []string
	// History is what GET /v1/history serves; its owner starts it.
	History *History
	// DeadStats, if not nil, reports each downstream's stored dead letters
	// for GET /v1/downstreams ("dead_letters") and the status page.
	DeadStats DeadStats
	// DeadLetters serves the dead-letter routes (list, show, replay,
	// delete, purge); nil = they answer 503.
	DeadLetters DeadLetters
	// Jobs returns the job records' reader, or nil while there is none
	// yet (the job routes answer 503 "starting").
	Jobs func() Jobs
}

// Server is the admin HTTP server: /metrics, /healthz, /readyz, /v1 and
// the status page. Create it with Start; Stop ends it.
type Server struct {
	srv  *http.Server
	addr string
	done chan error // the Serve goroutine's result

	stopOnce sync.Once
	stopErr  error

	mu       sync.Mutex
	active   map[net.Conn]struct{} // connections reading or answering a request
	stopping bool
	quiet    chan struct{} // closed once stopping with no request in progress
}

// Start serves /metrics, /healthz, /readyz, /v1 and the status page on
// cfg.Listen, over TLS and behind basic auth when configured; POSTs from
// another site's page are refused (403). It opens the
// listener before it returns, so a bad address or unreadable certificate
// fails here; serving runs on a goroutine the Server owns until Stop. The
// server has every timeout set, so slow clients cannot hold connections
// forever.
func Start(cfg config.Admin, deps Deps) (*Server, error) {
	tlsCfg, err := loadTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	ln, err := listen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	warnExposure(deps.Logger, cfg)
	// A browser that holds the operator's basic-auth credentials (the status
	// page was opened) would attach them to a POST another site's page makes
	// here; CrossOriginProtection refuses such POSTs (403, from Sec-Fetch-Site
	// or Origin) and lets same-origin and non-browser clients through.
	handler := crossOriginGuard().Handler(newMux(deps))
	if cfg.BasicAuth.Username != "" {
		handler = newBasicAuth(cfg.BasicAuth, deps.Logger, "/healthz", "/readyz").wrap(handler)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           handler,
			TLSConfig:         tlsCfg,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(deps.Logger.Handler(), slog.LevelWarn), // e.g. TLS handshake errors
		},
		addr:   ln.Addr().String(),
		done:   make(chan error, 1),
		active: map[net.Conn]struct{}{},
		quiet:  make(chan struct{}),
	}
	s.srv.ConnState = s.track
	go func() {
		var err error
		if tlsCfg != nil {
			err = s.srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			err = s.srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the address the server listens on (host:port).
func (s *Server) Addr() string { return s.addr }

// Stop shuts the server down, waiting up to 5 s for requests in progress,
// and returns once the serving goroutine has ended. A connection that has
// sent no request (a client's spare dial, a probe) is closed, not waited
// for: http.Server.Shutdown alone would wait 5 s for it and report the
// wait as an error. It is idempotent: later calls return the first call's
// error.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.mu.Lock()
		s.stopping = true
		s.quietLocked()
		s.mu.Unlock()
		go func() { // ends with Stop: cancel closes ctx
			select {
			case <-s.quiet:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := s.srv.Shutdown(ctx)
		if errors.Is(err, context.Canceled) { // no request in progress: the rest are silent
			err = nil
		}
		s.stopErr = errors.Join(err, s.srv.Close(), <-s.done)
	})
	return s.stopErr
}

// track follows the connections with a request in progress (the server's
// ConnState hook): from its first byte until its answer is written.
func (s *Server) track(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == http.StateActive {
		s.active[c] = struct{}{}
		return
	}
	delete(s.active, c)
	s.quietLocked()
}

// quietLocked closes quiet when the server stops with no request in
// progress. Requires s.mu.
func (s *Server) quietLocked() {
	if !s.stopping || len(s.active) > 0 {
		return
	}
	select {
	case <-s.quiet:
	default:
		close(s.quiet)
	}
}

// crossOriginGuard refuses POSTs from another origin's page with a JSON
// error like every other admin refusal.
func crossOriginGuard() *http.CrossOriginProtection {
	c := http.NewCrossOriginProtection()
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, api.Error{
			Error: r.Method + " from another site's page refused; use the status page on this address, shaperctl or curl"})
	}))
	return c
}

// listen opens the listener before serving so a bad address fails start-up.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin.listen %q: %w", addr, err)
	}
	return ln, nil
}

func newMux(deps Deps) *http.ServeMux {
	h := &handlers{Deps: deps}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(deps.Registry, promhttp.HandlerOpts{Registry: deps.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
	})
	mux.HandleFunc("GET /readyz", h.serveReady)
	mux.HandleFunc("GET /v1/downstreams", h.serveDownstreams)
	mux.Handle("POST /v1/downstreams/{name}/pause", limitBody(h.servePause(true)))
	mux.Handle("POST /v1/downstreams/{name}/resume", limitBody(h.servePause(false)))
	mux.Handle("PATCH /v1/downstreams/{name}", limitBody(http.HandlerFunc(h.serveOverride)))
	mux.Handle("DELETE /v1/downstreams/{name}/override", limitBody(http.HandlerFunc(h.serveUnsetOverride)))
	mux.HandleFunc("GET /v1/history", h.serveHistory)
	h.jobRoutes(mux)
	h.deadRoutes(mux)
	mux.HandleFunc("GET /{$}", h.serveStatusPage)
	return mux
}

// handlers serve the routes from Deps.
type handlers struct{ Deps }

// serveReady is 200 when nothing is listed by NotReady, else 503 with the list.
func (h *handlers) serveReady(w http.ResponseWriter, _ *http.Request) {
	if problems := h.NotReady(); len(problems) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: "unready", Problems: problems})
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: "ready"})
}

func (h *handlers) serveDownstreams(w http.ResponseWriter, r *http.Request) {
	ds := h.Downstreams()
	if ds == nil {
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "starting"})
		return
	}
	writeJSON(w, http.StatusOK, api.Downstreams[downstreamRow]{Downstreams: downstreamRows(r.Context(), time.Now(), ds.Lanes(), h.DeadStats)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client may have gone; nothing to do
}
