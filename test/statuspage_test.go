package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
)

type history struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	Downstreams     []struct {
		Name         string    `json:"name"`
		TimeUnixMs   []int64   `json:"time_unix_ms"`
		Depth        []int     `json:"depth"`
		AchievedRate []float64 `json:"achieved_rate"`
		RejectedRate []float64 `json:"rejected_rate"`
	} `json:"downstreams"`
}

func TestStatusPageAndHistory(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	ds := newDownstream(t)
	in, _ := startDaemonOpts(t, srv, baseConfig(
		lane("printer", "2/s", 5, "", ds.URL),
		lane("erp", "1/m", 10, "", ds.URL)), daemon.Options{HistoryInterval: 100 * time.Millisecond})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range 8 { // a burst into printer: 5 accepted, 3 queue_full
		if err := nc.Publish("shaper.jobs.printer", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 { // erp: one starts at once, 3 wait a minute each
		if err := nc.Publish("shaper.jobs.erp", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	ds.waitHits(t, 6, 10*time.Second)

	resp, err := http.Get(in.admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`<div class="dsname">erp</div>`, `<div class="dsname">printer</div>`,
		`queue_full 3`, ` of 1/m</span>`, ` of 2/s</span>`, `v1/history`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("GET / lacks %s", want)
		}
	}

	var h history
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := json.Unmarshal([]byte(in.get(t, "/v1/history", 200)), &h); err != nil {
			t.Fatal(err)
		}
		if len(h.Downstreams) == 2 && len(h.Downstreams[1].Depth) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history has no 3 samples within 10s: %+v", h)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h.IntervalSeconds != 0.1 || h.Downstreams[0].Name != "erp" || h.Downstreams[1].Name != "printer" {
		t.Errorf("history %+v", h)
	}
	if erp := h.Downstreams[0]; erp.Depth[len(erp.Depth)-1] != 3 {
		t.Errorf("erp depth %v, want 3 queued at the end", erp.Depth)
	}

	in.stop(t)
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "daemon.(*history).start") {
		t.Errorf("history sampler still running after the daemon stopped:\n%s", stacks)
	}
}

// TestStatusPageInChromium loads the whole daemon's page in headless
// Chromium and checks, in the DOM after the script ran, that its first poll
// drew the rows without an error (a thrown error reads "cannot reach the
// admin API (...)"). Skipped, saying so, where chromium is not installed.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	srv := runNATS(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "2/s", 5, "", "http://127.0.0.1:1/")))
	dom := chromiumDOM(t, chromium, in.admin+"/")
	for _, want := range []string{`<span id="conn" class="">updated `, `<div class="dsname">printer</div>`, `<th>Dead letters<br>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page in Chromium lacks %s:\n%s", want, dom)
		}
	}
}

// The page in Chromium shows what was changed at runtime: a timed pause's
// end, the next maintenance window, and the overridden values marked.
func TestStatusPageRuntimeInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	srv := runNATS(t)
	window := time.Now().UTC().Add(12 * time.Hour).Format("15:04")
	in := startDaemon(t, srv, baseConfig(
		lane("printer", "2/s", 5, "", "http://127.0.0.1:1/"),
		lane("erp", "2/s", 5, "    maintenance: [\"daily "+window+" 30m UTC\"]\n", "http://127.0.0.1:1/")))
	send := func(method, path, body string) {
		req, _ := http.NewRequest(method, in.admin+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s %s: %d %s", method, path, body, resp.StatusCode, b)
		}
	}
	send("POST", "/v1/downstreams/printer/pause", `{"for":"1h"}`)
	send("PATCH", "/v1/downstreams/erp", `{"concurrency":2,"capacity":50}`)
	dom := chromiumDOM(t, chromium, in.admin+"/")
	for _, want := range []string{
		`<span id="conn" class="">updated `,               // the script drew the page
		`by the admin API until `,                         // printer's timed pause
		`<div class="note maint">maintenance next `,       // erp's next window
		`override: concurrency 2 ✎ · capacity 50 ✎</div>`, // erp's overrides
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page in Chromium lacks %s:\n%s", want, dom)
		}
	}
}

// chromiumPath is the chromium binary, or skips the test saying why.
func chromiumPath(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: the status page is not run in a browser here (sudo apt-get install -y chromium)")
	}
	return chromium
}

// chromiumDOM loads url in headless Chromium, lets its script run (5 s of
// virtual time) and returns the DOM.
func chromiumDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, out)
	}
	return string(out)
}

func TestAdminAuthAndTLS(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := selfSignedCert(t)
	in, logs := startDaemonOpts(t, srv, fmt.Sprintf(`
nats: { url: "%%NATS%%" }
admin:
  listen: "0.0.0.0:0"
  basic_auth: { username: ops, password_hash: %q }
  tls: { cert_file: %q, key_file: %q }
downstreams:`, hash, certFile, keyFile)+lane("printer", "2/s", 5, "", "http://127.0.0.1:1/"), daemon.Options{})
	_, port, _ := net.SplitHostPort(in.d.AdminAddr())
	base := "https://127.0.0.1:" + port
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	do := func(path, user, pass string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, user, pass string
		want             int
	}{
		{"/", "", "", 401},
		{"/v1/downstreams", "ops", "wrong", 401},
		{"/v1/downstreams", "ops", "s3cret", 200},
		{"/", "ops", "s3cret", 200},
		{"/healthz", "", "", 200},
		{"/readyz", "", "", 200},
	} {
		if got := do(c.path, c.user, c.pass); got != c.want {
			t.Errorf("GET %s as %q/%q: %d, want %d", c.path, c.user, c.pass, got, c.want)
		}
	}
	// Basic auth over TLS on 0.0.0.0: protected, so no warning.
	if strings.Contains(logs.String(), "non-loopback") {
		t.Errorf("warned although auth and TLS are set: %s", logs)
	}
}

func TestNonLoopbackWarning(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	_, logs := startDaemonOpts(t, srv, strings.Replace(baseConfig(lane("printer", "2/s", 5, "", "http://127.0.0.1:1/")),
		`listen: "127.0.0.1:0"`, `listen: "0.0.0.0:0"`, 1), daemon.Options{})
	if want := `level=WARN msg="admin API listens on a non-loopback address without basic auth`; !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, logs)
	}
}

func TestAdminPostBodyLimit(t *testing.T) {
	t.Parallel()
	srv := runNATS(t)
	in := startDaemon(t, srv, baseConfig(lane("printer", "2/s", 5, "", "http://127.0.0.1:1/")))
	resp, err := http.Post(in.admin+"/v1/downstreams/printer/pause", "application/json", strings.NewReader(strings.Repeat("x", 4096)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("POST with 4 KiB body: %d, want 413", resp.StatusCode)
	}
	in.do(t, "POST", "/v1/downstreams/printer/pause", 200)
}

func selfSignedCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shaper test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
