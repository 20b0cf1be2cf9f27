package test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// chaos runs the faults of TestChaos and keeps what they did.
type chaos struct {
	t         *testing.T
	rng       *rand.Rand // the schedule's: used by the scheduling goroutine only
	conf      string     // shaperd's config, %ADMIN% to fill in
	nodes     []*natsNode
	js        jetstream.JetStream
	pinnedTTL time.Duration
	t0        time.Time
	wg        sync.WaitGroup

	mu       sync.Mutex
	daemons  []*proc
	busy     []bool // a fault holds daemon i
	natsDown bool   // a node is down or not yet current again: one at a time
	log      []string
	counts   map[string]int
	restarts []chaosRestart
	failures []string
	natsGen  int // NATS faults begun or ended: a start that saw it change overlapped one
}

// Fault kinds.
const (
	faultDaemonKill = "daemon kill -9"
	faultDaemonStop = "daemon SIGSTOP"
	faultDaemonHUP  = "daemon SIGHUP"
	faultNATSKill   = "nats kill -9"
	faultLeaderKill = "nats leader kill -9"
)

// chaosRestartBound is how soon a restarted daemon must be ready while
// daemons around it are killed and frozen but every NATS node is up: the
// promise is 2 s on a healthy cluster (TestRestartReadySoon); 10 s leaves
// room for a loaded 2-core machine and a stream leader that just moved.
// chaosRestartBoundNATS is the bound when a NATS node was down or
// catching up during the start: each start-up check (the queue, the
// dead-letter stream, the dedupe records) may lose requests to leader
// elections, each check giving up after 10 s of tries of 1, 2 and 4 s.
const (
	chaosRestartBound     = 10 * time.Second
	chaosRestartBoundNATS = 30 * time.Second
)

// chaosRestart is one daemon restart: how long until ready, and whether a
// NATS node was down or catching up at some point meanwhile.
type chaosRestart struct {
	took      time.Duration
	natsFault bool
}

func (c *chaos) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf("%6.2fs ", time.Since(c.t0).Seconds())+fmt.Sprintf(format, args...))
}

func (c *chaos) fail(format string, args ...any) {
	c.note("FAIL: "+format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// startDaemon runs a shaperd on the config with a fresh admin port and
// returns it once /readyz says ready, and how long that took.
func (c *chaos) startDaemon() (*proc, time.Duration, error) {
	var err error
	for range 3 { // a port picked free may be taken before shaperd binds it
		addr := freeAddr(c.t)
		path := filepath.Join(c.t.TempDir(), "shaper.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(c.conf, "%ADMIN%", addr)), 0o600); err != nil {
			return nil, 0, err
		}
		t0 := time.Now()
		var p *proc
		p, err = runShaperdWithin(c.t, path, addr, chaosRestartBoundNATS+10*time.Second) // past the bound: the check reports it
		if err == nil {
			return p, time.Since(t0), nil
		}
		if !strings.Contains(p.stderr.String(), "address already in use") {
			return p, 0, err
		}
	}
	return nil, 0, err
}

// schedule picks and starts the next fault from c.rng (the seed decides
// the kind, the target and the durations; whether the target is free
// then decides the rest).
func (c *chaos) schedule() {
	kinds := []string{faultDaemonKill, faultDaemonKill, faultDaemonKill, faultDaemonStop, faultDaemonStop,
		faultDaemonHUP, faultNATSKill, faultNATSKill, faultLeaderKill, faultLeaderKill}
	kind := kinds[c.rng.IntN(len(kinds))]
	target := c.rng.IntN(3)
	hold := time.Duration(300+c.rng.IntN(2700)) * time.Millisecond
	stream := "SHAPER_gateway"
	if c.rng.IntN(3) == 0 {
		stream = "KV_SHAPER_DEDUPE"
	}
	switch kind {
	case faultNATSKill, faultLeaderKill:
		c.mu.Lock()
		free := !c.natsDown
		c.natsDown = c.natsDown || free
		if free {
			c.natsGen++
		}
		c.mu.Unlock()
		if !free {
			c.note("skipped %s: a node is still down or catching up", kind)
			return
		}
		c.count(kind)
		c.wg.Go(func() { c.natsFault(kind, target, stream, hold) })
	default:
		c.mu.Lock()
		i := -1
		for k := range 3 { // the target, or the next free daemon; at most two faulted at once
			if j := (target + k) % 3; !c.busy[j] && i < 0 {
				i = j
			}
		}
		faulted := 0
		for _, b := range c.busy {
			if b {
				faulted++
			}
		}
		if i < 0 || faulted >= 2 && kind != faultDaemonHUP {
			c.mu.Unlock()
			c.note("skipped %s: daemons busy", kind)
			return
		}
		c.busy[i] = true
		p := c.daemons[i]
		c.mu.Unlock()
		c.count(kind)
		c.wg.Go(func() {
			c.daemonFault(kind, i, p, hold)
			c.mu.Lock()
			c.busy[i] = false
			c.mu.Unlock()
		})
	}
}

func (c *chaos) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kind]++
}

// daemonFault runs one fault on daemon i (process p) and leaves it up.
func (c *chaos) daemonFault(kind string, i int, p *proc, hold time.Duration) {
	switch kind {
	case faultDaemonHUP:
		c.note("SIGHUP daemon %d", i)
		_ = p.cmd.Process.Signal(syscall.SIGHUP)
	case faultDaemonStop:
		hold += c.pinnedTTL // past pinned_ttl: another daemon takes the pin
		c.note("SIGSTOP daemon %d for %s", i, hold.Round(time.Millisecond))
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(hold)
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		c.note("SIGCONT daemon %d", i)
	case faultDaemonKill:
		c.note("kill -9 daemon %d, down for %s", i, hold.Round(time.Millisecond))
		p.kill(c.t)
		time.Sleep(hold)
		c.mu.Lock()
		gen, down := c.natsGen, c.natsDown
		c.mu.Unlock()
		np, took, err := c.startDaemon()
		if err != nil {
			c.fail("restart of daemon %d: %v", i, err)
			return
		}
		c.mu.Lock()
		r := chaosRestart{took: took, natsFault: down || c.natsDown || gen != c.natsGen}
		c.daemons[i] = np
		c.restarts = append(c.restarts, r)
		c.mu.Unlock()
		bound := chaosRestartBound
		if r.natsFault {
			bound = chaosRestartBoundNATS
		}
		c.note("daemon %d ready %s after its restart (NATS fault under way: %v)", i, took.Round(time.Millisecond), r.natsFault)
		if took > bound {
			c.fail("daemon %d ready %s after its restart, bound %s", i, took.Round(time.Millisecond), bound)
		}
	}
}

// natsFault kills node target (or the leader of stream, for a leader
// kill) for hold, restarts it and waits until it is current again.
func (c *chaos) natsFault(kind string, target int, stream string, hold time.Duration) {
	defer func() {
		c.mu.Lock()
		c.natsDown = false
		c.natsGen++
		c.mu.Unlock()
	}()
	n := c.nodes[target]
	if kind == faultLeaderKill {
		leader := streamLeader(c.js, stream)
		for _, m := range c.nodes {
			if m.name == leader {
				n = m
			}
		}
		c.note("kill -9 nats %s (leader of %s: %q), down for %s", n.name, stream, leader, hold.Round(time.Millisecond))
	} else {
		c.note("kill -9 nats %s, down for %s", n.name, hold.Round(time.Millisecond))
	}
	if err := n.kill9(); err != nil {
		c.fail("%v", err)
		return
	}
	time.Sleep(hold)
	if err := n.start(); err != nil {
		c.fail("restart nats %s: %v", n.name, err)
		return
	}
	if err := n.waitHealthy(60 * time.Second); err != nil {
		c.fail("%v", err)
		return
	}
	c.note("nats %s healthy again", n.name)
}

// summary is the faults' count per kind, e.g. "daemon kill -9 5, …".
func (c *chaos) summary() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	total := 0
	for _, k := range []string{faultDaemonKill, faultDaemonStop, faultDaemonHUP, faultNATSKill, faultLeaderKill} {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.counts[k]))
		total += c.counts[k]
	}
	return strings.Join(parts, ", "), total
}
