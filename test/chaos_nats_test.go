package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	natsBuildOnce sync.Once
	natsBinPath   string
	natsBuildErr  error
)

// natsServerBinary builds nats-server (the version in go.mod) once per
// test run, next to the shaperd binary so that TestMain removes both.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	dir := filepath.Dir(shaperdBinary(t))
	natsBuildOnce.Do(func() {
		natsBinPath = filepath.Join(dir, "nats-server")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", natsBinPath, "github.com/nats-io/nats-server/v2")
		cmd.Dir = filepath.Dir(filepath.Dir(file))
		if out, err := cmd.CombinedOutput(); err != nil {
			natsBuildErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if natsBuildErr != nil {
		t.Fatal(natsBuildErr)
	}
	return natsBinPath
}

// natsNode is one nats-server process of a cluster; restarts keep its
// ports and store directory.
type natsNode struct {
	name    string
	client  int // port
	monitor int // port: /healthz
	conf    string
	bin     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan error
	stderr  *syncBuffer
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.client) }

// start runs the node's process (not waiting for it to be ready).
func (n *natsNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := exec.Command(n.bin, "-c", n.conf)
	stderr := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = stderr, stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	n.cmd, n.exited, n.stderr = cmd, exited, stderr
	return nil
}

// kill9 sends SIGKILL and waits for the process to be gone (idempotent).
func (n *natsNode) kill9() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("nats node %s did not die within 10 s of SIGKILL", n.name)
	}
	n.cmd = nil
	return nil
}

// healthy reports whether the node answers /healthz with 200: its
// JetStream is up and its streams and consumers are current.
func (n *natsNode) healthy() bool {
	code, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.monitor))
	return err == nil && code == http.StatusOK
}

// waitHealthy waits up to d for healthy.
func (n *natsNode) waitHealthy(d time.Duration) error {
	for deadline := time.Now().Add(d); !n.healthy(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("nats node %s not healthy within %s", n.name, d)
		}
	}
	return nil
}

// freePorts returns n loopback ports that were free when picked.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// runNATSProcesses starts a 3-node JetStream cluster of nats-server
// processes on loopback and waits until every node is healthy and the
// JetStream API answers.
func runNATSProcesses(t *testing.T) []*natsNode {
	t.Helper()
	bin := natsServerBinary(t)
	ports := freePorts(t, 9)
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
	}
	var nodes []*natsNode
	for i := range 3 {
		dir := t.TempDir()
		n := &natsNode{name: fmt.Sprint("n", i), client: ports[i], monitor: ports[6+i], bin: bin,
			conf: filepath.Join(dir, "nats.conf")}
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: %q }
cluster {
  name: chaos
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, n.name, n.client, n.monitor, filepath.Join(dir, "js"), ports[3+i], strings.Join(routes, ", "))
		if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.kill9() })
		nodes = append(nodes, n)
	}
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitFor(t, 30*time.Second, func() bool {
		for _, n := range nodes {
			if !n.healthy() {
				return false
			}
		}
		_, err := nc.Request("$JS.API.INFO", nil, time.Second)
		return err == nil
	}, "a healthy 3-node nats-server cluster")
	return nodes
}

// streamLeader returns the server name of stream's leader, or "".
func streamLeader(js jetstream.JetStream, stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	if info := s.CachedInfo(); info != nil && info.Cluster != nil {
		return info.Cluster.Leader
	}
	return ""
}
