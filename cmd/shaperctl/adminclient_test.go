package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	testUser     = "ops"
	testPassword = "s3cret-pw"
)

// secureAdmin answers like a daemon with admin.basic_auth: /healthz is
// open, everything else needs ops / s3cret-pw, and a 401 says so in JSON.
func secureAdmin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte(`{"status":"ok"}`))
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != testUser || p != testPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="shaper admin"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"authentication required (admin.basic_auth)"}`))
			return
		}
		switch r.URL.Path {
		case "/v1/downstreams":
			_, _ = w.Write([]byte(sampleDownstreams))
		case "/v1/downstreams/printer/dead":
			_, _ = w.Write([]byte(sampleDeadList))
		default:
			http.NotFound(w, r)
		}
	})
}

// newTLSAdmin serves secureAdmin over HTTPS, the handshake errors the
// tests cause (untrusted certificate) kept out of the output.
func newTLSAdmin(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(secureAdmin())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// clearAdminEnv unsets the admin env vars for the test, whatever the
// environment it runs in has.
func clearAdminEnv(t *testing.T) {
	for _, k := range []string{envAdminURL, envAdminUser, envAdminPassword, envAdminCA} {
		t.Setenv(k, "")
	}
}

// certFile writes the test server's certificate as PEM: the -ca file.
func certFile(t *testing.T, srv *httptest.Server) string {
	return writePEM(t, "ca.pem", srv.Certificate().Raw)
}

func writePEM(t *testing.T, name string, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherCA is a self-signed certificate that signed nothing the server has.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, "other.pem", der)
}

type cliCase struct {
	name string
	env  map[string]string
	args []string
	code int
	want string // in stdout+stderr
}

func runCases(t *testing.T, cases []cliCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			clearAdminEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCmd(t, tt.args...)
			t.Logf("exit %d\n%s%s", code, stdout, stderr)
			if code != tt.code || !strings.Contains(stdout+stderr, tt.want) {
				t.Errorf("exit %d, want %d and %q in\nstdout %s\nstderr %s", code, tt.code, tt.want, stdout, stderr)
			}
			for _, secret := range []string{testPassword, "wrong-pw"} {
				if strings.Contains(stdout+stderr, secret) {
					t.Errorf("the output shows a password:\n%s%s", stdout, stderr)
				}
			}
		})
	}
}

func TestAdminAuth(t *testing.T) {
	srv := newTLSAdmin(t)
	ca := certFile(t, srv)
	withCA := func(args ...string) []string { return append(args, "-admin", srv.URL, "-ca", ca) }
	creds := map[string]string{envAdminUser: testUser, envAdminPassword: testPassword}
	runCases(t, []cliCase{
		{"no credentials", nil, withCA("status"), exitFailed,
			"401 Unauthorized: authentication required (admin.basic_auth)\nthe admin API needs credentials: pass -user NAME and -password (or set SHAPER_ADMIN_USER and SHAPER_ADMIN_PASSWORD)"},
		{"flags", nil, withCA("status", "-user", testUser, "-password", testPassword), exitOK, "printer  2/s (effective 1.5/s)"},
		{"env", creds, withCA("status"), exitOK, "printer  2/s (effective 1.5/s)"},
		{"flag wins over env", map[string]string{envAdminUser: testUser, envAdminPassword: "wrong-pw"},
			withCA("status", "-password", testPassword), exitOK, "printer"},
		{"flag wins, wrong", creds, withCA("status", "-password", "wrong-pw"), exitFailed,
			`the admin API refused user "ops" with that password: check -user and -password`},
		{"url user info", nil, []string{"status", "-ca", ca, "-admin", strings.Replace(srv.URL, "https://", "https://ops:"+testPassword+"@", 1)},
			exitOK, "printer"},
		{"url wrong password", nil, []string{"status", "-ca", ca, "-admin", strings.Replace(srv.URL, "https://", "https://ops:wrong-pw@", 1)},
			exitFailed, `refused user "ops" with that password`},
		{"env URL and CA", map[string]string{envAdminURL: srv.URL, envAdminCA: ca, envAdminUser: testUser, envAdminPassword: testPassword},
			[]string{"status", "-json"}, exitOK, `"name": "printer"`},
		{"dead list", creds, withCA("dead", "list", "-downstream", "printer"), exitOK, "2 of 7 dead letters of printer"},
		{"dead no credentials", nil, withCA("dead", "list", "-downstream", "printer"), exitFailed, "pass -user NAME and -password"},
		{"password without user", nil, withCA("status", "-password", testPassword), exitUsage, "-password needs -user NAME (or SHAPER_ADMIN_USER)"},
	})
}

func TestAdminTLS(t *testing.T) {
	srv := newTLSAdmin(t)
	plain := httptest.NewServer(secureAdmin())
	defer plain.Close()
	ca := certFile(t, srv)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	runCases(t, []cliCase{
		{"untrusted", nil, []string{"status", "-admin", srv.URL, "-user", testUser, "-password", testPassword}, exitFailed,
			"the admin API's certificate at " + srv.URL + " is not trusted"},
		{"untrusted hint", nil, []string{"health", "-admin", srv.URL}, exitFailed,
			"pass the CA that signed it (or the certificate itself, if self-signed) with -ca FILE"},
		{"other CA", nil, []string{"status", "-admin", srv.URL, "-ca", otherCA(t)}, exitFailed,
			"is not signed by the CA in -ca "},
		{"host not in certificate", nil, []string{"health", "-admin", "https://localhost" + port, "-ca", ca}, exitFailed,
			"the admin API's certificate does not name the host in -admin https://localhost" + port},
		{"http to a TLS daemon", nil, []string{"health", "-admin", strings.Replace(srv.URL, "https://", "http://", 1)}, exitFailed,
			"the admin API serves HTTPS (admin.tls): use -admin " + srv.URL},
		{"https to a plain daemon", nil, []string{"health", "-admin", strings.Replace(plain.URL, "http://", "https://", 1)}, exitFailed,
			"answers plain HTTP (admin.tls is not set): use -admin " + plain.URL},
		{"ca with http", nil, []string{"status", "-admin", plain.URL, "-ca", ca}, exitUsage,
			"-ca is for an https:// admin URL (a daemon with admin.tls), got -admin " + plain.URL},
		{"ca missing", nil, []string{"status", "-admin", srv.URL, "-ca", "/nonexistent.pem"}, exitUsage, "-ca: open /nonexistent.pem"},
		{"ca not PEM", nil, []string{"status", "-admin", srv.URL, "-ca", "main.go"}, exitUsage, "-ca main.go: no PEM certificate in it"},
		{"bad scheme", nil, []string{"status", "-admin", "ftp://x:1"}, exitUsage, `-admin "ftp://x:1": want http://HOST:PORT or https://HOST:PORT`},
	})
}

func TestHealth(t *testing.T) {
	srv := newTLSAdmin(t)
	plain := httptest.NewServer(secureAdmin())
	defer plain.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "stopping"})
	}))
	defer sick.Close()
	runCases(t, []cliCase{
		{"open with basic auth", nil, []string{"health", "-admin", plain.URL}, exitOK, "ok: " + plain.URL + "/healthz"},
		{"tls", nil, []string{"health", "-admin", srv.URL, "-ca", certFile(t, srv)}, exitOK, "ok: " + srv.URL + "/healthz"},
		{"env", map[string]string{envAdminURL: srv.URL, envAdminCA: certFile(t, srv)}, []string{"health"}, exitOK, "ok: " + srv.URL},
		{"not 200", nil, []string{"health", "-admin", sick.URL}, exitFailed, "GET /healthz: 503 Service Unavailable: stopping"},
		{"down", nil, []string{"health", "-admin", unreachableAdmin}, exitFailed, "cannot reach the admin API at " + unreachableAdmin},
		{"timeout", nil, []string{"health", "-timeout", "0s"}, exitUsage, "-timeout must be positive"},
		{"help", nil, []string{"health", "-h"}, exitOK, "/healthz needs no credentials"},
	})
}
