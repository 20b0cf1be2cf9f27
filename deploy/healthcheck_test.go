package deploy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/test"
	"golang.org/x/crypto/bcrypt"

	"github.com/shaperd/shaper/config"
)

// healthcheckCmd is the final stage's HEALTHCHECK CMD (exec form), its
// binary replaced by the shaperctl the tests built.
func healthcheckCmd(t *testing.T) []string {
	t.Helper()
	var hc string
	for _, in := range parseDockerfile(t, "Dockerfile") {
		if in.cmd == "HEALTHCHECK" {
			hc = in.args
		}
	}
	_, cmd, ok := strings.Cut(hc, " CMD ")
	var argv []string
	if !ok || json.Unmarshal([]byte(cmd), &argv) != nil || len(argv) < 2 {
		t.Fatalf("Dockerfile: HEALTHCHECK %q: want ... CMD [\"/usr/local/bin/shaperctl\", \"health\", ...] (exec form: the image has no shell)", hc)
	}
	if argv[0] != "/usr/local/bin/shaperctl" {
		t.Fatalf("Dockerfile: HEALTHCHECK runs %s, want /usr/local/bin/shaperctl", argv[0])
	}
	return append([]string{shaperctl(t)}, argv[1:]...)
}

// runProbe runs the HEALTHCHECK's command with env added to a copy of the
// test's environment without any SHAPER_ADMIN_* variable.
func runProbe(t *testing.T, argv []string, env ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHAPER_ADMIN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd.CombinedOutput()
}

// TestHealthcheckProbe runs the HEALTHCHECK's command against a port nothing
// listens on: it must fail, or Docker would call a dead daemon healthy. The
// live daemon's side is TestHealthcheckWithAuthAndTLS.
func TestHealthcheckProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out, err := runProbe(t, healthcheckCmd(t), "SHAPER_ADMIN_URL=http://"+addr)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("HEALTHCHECK against nothing (%s): want a non-zero exit, got %v\n%s", addr, err, out)
	}
}

// TestHealthcheckWithAuthAndTLS runs the real daemon with admin.basic_auth
// and admin.tls, as a non-loopback admin port should be, and the
// HEALTHCHECK's command against it: it must pass without credentials
// (GET /healthz is open), over HTTPS given the CA by env, while the
// downstream table still needs the credentials.
func TestHealthcheckWithAuthAndTLS(t *testing.T) {
	argv := healthcheckCmd(t)
	cert, key := selfSigned(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("pw-for-test"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, "example.yaml")
	cfg.Admin.BasicAuth = config.AdminBasicAuth{Username: "ops", PasswordHash: string(hash)}
	cfg.Admin.TLS = config.AdminTLS{CertFile: cert, KeyFile: key}
	admin := "https://" + runDaemon(t, cfg)
	tlsEnv := []string{"SHAPER_ADMIN_URL=" + admin, "SHAPER_ADMIN_CA=" + cert}

	if out, err := runProbe(t, argv, tlsEnv...); err != nil {
		t.Errorf("HEALTHCHECK with admin.basic_auth and admin.tls: %v\n%s", err, out)
	}
	if out, err := runProbe(t, argv, "SHAPER_ADMIN_URL="+admin); err == nil || !strings.Contains(string(out), "-ca FILE") {
		t.Errorf("HEALTHCHECK without the CA: want a failure naming -ca, got %v\n%s", err, out)
	}
	status := []string{argv[0], "status"}
	if out, err := runProbe(t, status, tlsEnv...); err == nil || !strings.Contains(string(out), "pass -user NAME and -password") {
		t.Errorf("status without credentials: want a 401 naming -user/-password, got %v\n%s", err, out)
	}
	out, err := runProbe(t, status, append(tlsEnv, "SHAPER_ADMIN_USER=ops", "SHAPER_ADMIN_PASSWORD=pw-for-test")...)
	if err != nil || !strings.Contains(string(out), "printer") {
		t.Errorf("status with credentials: %v\n%s", err, out)
	}
}

// runDaemon runs shaperd on cfg against an in-process NATS server, the
// admin API on a free loopback port, until the test ends; it returns the
// admin address once the daemon is ready.
func runDaemon(t *testing.T, cfg config.Config) string {
	t.Helper()
	opts := natsserver.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = t.TempDir()
	srv := natsserver.RunServer(&opts)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	cfg.NATS.URL = srv.ClientURL()
	cfg.Admin.Listen = "127.0.0.1:0"
	return runConfig(t, cfg, slog.LevelInfo).AdminAddr()
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files: the admin.tls pair, and the CA the probe trusts.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shaperd admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	for path, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
