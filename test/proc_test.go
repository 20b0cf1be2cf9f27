package test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is a shaperd process under test.
type proc struct {
	cmd    *exec.Cmd
	admin  string // http://host:port
	exited chan error
	stderr *syncBuffer
}

// startShaperd runs the shaperd binary with yaml (%ADMIN% is replaced by a
// free loopback address) and waits until /readyz says ready.
func startShaperd(t *testing.T, yaml string) *proc {
	t.Helper()
	return startShaperdEnv(t, yaml, nil)
}

// startShaperdEnv is startShaperd with env added to the process's
// environment.
func startShaperdEnv(t *testing.T, yaml string, env []string) *proc {
	t.Helper()
	// freeAddr's port is free when picked, but another process on a busy
	// machine may bind it before shaperd does: then shaperd exits at once
	// and a new port is tried.
	for try := 1; ; try++ {
		addr := freeAddr(t)
		path := filepath.Join(t.TempDir(), "shaper.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "%ADMIN%", addr)), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := runShaperdEnv(t, path, addr, 20*time.Second, env)
		if err == nil {
			return p
		}
		if try == 3 || !strings.Contains(p.stderr.String(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("admin port taken before shaperd bound it; trying another: %v", err)
	}
}

// startShaperdFile runs the shaperd binary on the config file at path, whose
// admin.listen is adminAddr, and waits until /readyz says ready.
func startShaperdFile(t *testing.T, path, adminAddr string) *proc {
	t.Helper()
	p, err := runShaperdFile(t, path, adminAddr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runShaperdFile is startShaperdFile returning, not failing on, an early
// exit or a daemon not ready in time. The process is killed at cleanup.
func runShaperdFile(t *testing.T, path, adminAddr string) (*proc, error) {
	t.Helper()
	return runShaperdWithin(t, path, adminAddr, 20*time.Second)
}

// runShaperdWithin is runShaperdFile waiting up to within for ready.
func runShaperdWithin(t *testing.T, path, adminAddr string, within time.Duration) (*proc, error) {
	t.Helper()
	return runShaperdEnv(t, path, adminAddr, within, nil)
}

// runShaperdEnv is runShaperdWithin with env added to the process's
// environment.
func runShaperdEnv(t *testing.T, path, adminAddr string, within time.Duration, env []string) (*proc, error) {
	t.Helper()
	p := &proc{cmd: exec.Command(shaperdBinary(t), "-config", path), admin: "http://" + adminAddr,
		exited: make(chan error, 1), stderr: &syncBuffer{}}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill(t) })
	return p, readyWithin(p.admin, p.exited, p.stderr, within)
}

// kill sends SIGKILL and waits for the process to be gone (idempotent).
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("shaperd did not die within 10s of SIGKILL")
	}
}

// laneStatus is the part of GET /v1/downstreams the tests read.
type laneStatus struct {
	Name    string `json:"name"`
	Depth   int    `json:"depth"`
	Started uint64 `json:"started"`
}

// lanes returns the process's downstream table, or nil if it cannot answer.
func (p *proc) lanes() []laneStatus {
	resp, err := http.Get(p.admin + "/v1/downstreams")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var v struct {
		Downstreams []laneStatus `json:"downstreams"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return nil
	}
	return v.Downstreams
}

func (p *proc) post(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Post(p.admin+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}
