package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/shaperd/shaper/config"
)

// embeddedHeadroom is added to the server's max_payload over ingress.max_payload
// so that a payload one byte over our limit reaches us and gets an honest
// payload_too_large reply instead of a publish error at the producer.
const embeddedHeadroom = 64 << 10

// embeddedReadyWithin bounds the embedded server's start: waiting for its
// port (a daemon that was just stopped may still hold it while it finishes
// its shutdown grace) and then for the server, which recovers its
// JetStream store before it accepts connections.
const embeddedReadyWithin = 2 * time.Minute

// startEmbedded starts an in-process NATS server with JetStream, storing
// under cfg.Embedded.StoreDir. A listen port of 0 picks a free port.
func startEmbedded(cfg config.Config, log *slog.Logger) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(cfg.NATS.Embedded.Listen)
	if err != nil {
		return nil, fmt.Errorf("nats.embedded.listen %q: %w", cfg.NATS.Embedded.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("nats.embedded.listen %q: port is not a number", cfg.NATS.Embedded.Listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	maxPayload := int64(cfg.Ingress.MaxPayload) + embeddedHeadroom
	if b := cfg.Ingress.Bulk; b.On() { // a bulk request's body, and one byte more for an honest refusal
		maxPayload = max(maxPayload, int64(b.MaxBytes)+embeddedHeadroom)
	}
	if maxPayload < server.MAX_PAYLOAD_SIZE {
		maxPayload = server.MAX_PAYLOAD_SIZE
	}
	sync, err := config.ParseSync(cfg.NATS.Embedded.Sync)
	if err != nil {
		return nil, fmt.Errorf("nats.embedded.sync: %w", err)
	}
	opts := &server.Options{
		SyncAlways:             sync.Always,
		SyncInterval:           sync.Interval, // 0: the server's own
		ServerName:             "shaperd-embedded",
		Host:                   host,
		Port:                   port,
		JetStream:              true,
		StoreDir:               cfg.NATS.Embedded.StoreDir,
		JetStreamMaxStore:      int64(cfg.NATS.Embedded.MaxStore), // 0: the server's own
		MaxPayload:             int32(maxPayload),
		NoSigs:                 true,
		NoLog:                  true,
		DisableJetStreamBanner: true,
	}
	deadline := time.Now().Add(embeddedReadyWithin)
	if port != server.RANDOM_PORT {
		if err := waitForPort(net.JoinHostPort(host, portStr), deadline, log); err != nil {
			return nil, err
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(time.Until(deadline)) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats server on %s did not become ready within %s", cfg.NATS.Embedded.Listen, embeddedReadyWithin)
	}
	if jc := srv.JetStreamConfig(); jc != nil { // the mode the store runs with, as the server has it
		sync = config.StoreSync{Always: jc.SyncAlways, Interval: jc.SyncInterval}
	}
	log.Info("embedded NATS server started", "url", srv.ClientURL(), "store_dir", cfg.NATS.Embedded.StoreDir, "store_sync", sync.String())
	return srv, nil
}

// waitForPort waits until addr can be listened on, or deadline: a daemon
// restarted right after a stop finds the port still held while the old
// one finishes. It logs once while it waits.
func waitForPort(addr string, deadline time.Time, log *slog.Logger) error {
	logged := false
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			_ = ln.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded nats server: nats.embedded.listen %s is still in use after %s: %w", addr, embeddedReadyWithin, err)
		}
		if !logged {
			logged = true
			log.Warn("embedded NATS server: waiting for its port (a stopping daemon may still hold it)", "listen", addr, "error", err.Error())
		}
		// A poll is right here: the OS tells no one when another
		// process lets go of a port, so trying to bind again is the
		// only way to learn it.
		time.Sleep(100 * time.Millisecond)
	}
}

// connectOptions are the client options, chosen deliberately:
//   - it never gives up reconnecting (MaxReconnects -1), retrying every
//     250 ms plus jitter, and it starts even if NATS is not there yet;
//   - a connection that silently stops carrying data (a black-holed
//     route, a frozen server) is declared dead after 2 unanswered pings
//     2 s apart, so it is detected within about 4–6 s;
//   - while reconnecting, up to 8 MiB of publishes (replies, deliveries,
//     dead letters) are buffered; past that a publish fails and is counted.
//
// subscribed is cleared when the connection drops and set again once a
// flush after (re)connecting has come back: the server has then processed
// the intake subscription the client re-sends, so /readyz never says ready
// while a request would find no responder.
func connectOptions(cfg config.NATS, m *daemonMetrics, log *slog.Logger, subscribed *atomic.Bool) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("shaperd"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.ReconnectBufSize(8 << 20),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			subscribed.Store(false)
			m.natsConnected.Set(0)
			log.Warn("NATS disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			m.natsConnected.Set(1)
			m.natsReconnects.Inc()
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted())
			confirmSubscriptions(nc, subscribed, log)
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			m.natsConnected.Set(1)
			log.Info("NATS connected", "url", nc.ConnectedUrlRedacted())
			confirmSubscriptions(nc, subscribed, log)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("NATS async error", "subject", subj, "err", err)
		}),
	}
	switch {
	case cfg.Creds != "":
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	case cfg.NKey != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKey)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CA))
	}
	if cfg.TLS.Cert != "" || cfg.TLS.Key != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.Cert, cfg.TLS.Key))
	}
	return opts, nil
}

// confirmSubscriptions flushes (a PING answered by a PONG), which proves the
// server has processed every SUB the client sent before it, then marks the
// intake subscribed. It runs on the client's callback goroutine and blocks
// it for one round trip at most 5 s.
func confirmSubscriptions(nc *nats.Conn, subscribed *atomic.Bool, log *slog.Logger) {
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		log.Warn("NATS (re)connected but the intake subscription is not confirmed yet", "err", err)
		return
	}
	subscribed.Store(true)
}
