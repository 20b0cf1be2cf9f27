package admin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/shaperd/shaper/config"
)

func withAuth(t *testing.T, user, pass string) config.Admin {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost) // fast; production uses 10
	if err != nil {
		t.Fatal(err)
	}
	return config.Admin{Listen: "127.0.0.1:0", BasicAuth: config.AdminBasicAuth{Username: user, PasswordHash: string(hash)}}
}

func TestBasicAuth(t *testing.T) {
	a := startTestAdmin(t, withAuth(t, "ops", "s3cret"), "printer")
	req := func(method, path, user, pass string) (int, http.Header) {
		r, err := http.NewRequest(method, a.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" || pass != "" {
			r.SetBasicAuth(user, pass)
		}
		status, hdr, _ := call(t, nil, r)
		return status, hdr
	}
	tests := []struct {
		name, method, path, user, pass string
		want                           int
	}{
		{"no credentials", "GET", "/v1/downstreams", "", "", 401},
		{"wrong password", "GET", "/v1/downstreams", "ops", "guess", 401},
		{"wrong user", "GET", "/v1/downstreams", "root", "s3cret", 401},
		{"user is case-sensitive", "GET", "/v1/downstreams", "OPS", "s3cret", 401},
		{"right", "GET", "/v1/downstreams", "ops", "s3cret", 200},
		{"status page", "GET", "/", "ops", "s3cret", 200},
		{"status page without", "GET", "/", "", "", 401},
		{"history", "GET", "/v1/history", "ops", "s3cret", 200},
		{"metrics without", "GET", "/metrics", "", "", 401},
		{"metrics", "GET", "/metrics", "ops", "s3cret", 200},
		{"pause without", "POST", "/v1/downstreams/printer/pause", "", "", 401},
		{"pause", "POST", "/v1/downstreams/printer/pause", "ops", "s3cret", 200},
		{"unknown path without", "GET", "/nope", "", "", 401},
		{"healthz is open", "GET", "/healthz", "", "", 200},
		{"readyz is open", "GET", "/readyz", "", "", 503}, // never Run: not ready, but not 401
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr := req(tt.method, tt.path, tt.user, tt.pass)
			if status != tt.want {
				t.Fatalf("%s %s: %d, want %d", tt.method, tt.path, status, tt.want)
			}
			if want := `Basic realm="shaper admin", charset="UTF-8"`; status == 401 && hdr.Get("WWW-Authenticate") != want {
				t.Errorf("WWW-Authenticate = %q, want %q", hdr.Get("WWW-Authenticate"), want)
			}
		})
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shaper admin test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	write := func(path, typ string, b []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", der)
	write(keyFile, "EC PRIVATE KEY", kder)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestAdminTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	admin := withAuth(t, "ops", "s3cret")
	admin.TLS = config.AdminTLS{CertFile: certFile, KeyFile: keyFile}
	a := startTestAdmin(t, admin, "printer")
	if !strings.HasPrefix(a.url, "https://") {
		t.Fatalf("url %s", a.url)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", a.url+"/v1/downstreams", nil)
	req.SetBasicAuth("ops", "s3cret")
	if status, _, body := call(t, client, req); status != 200 || !strings.Contains(body, `"printer"`) {
		t.Errorf("GET over TLS: %d %s", status, body)
	}
	req, _ = http.NewRequest("GET", a.url+"/healthz", nil)
	if status, _, _ := call(t, client, req); status != 200 {
		t.Errorf("GET /healthz over TLS: %d", status)
	}
	// Plain HTTP to the TLS port is refused by the server.
	plain := "http://" + strings.TrimPrefix(a.url, "https://") + "/healthz"
	if status, _, _ := get(t, plain); status != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS listener: %d, want 400", status)
	}
}

func TestAdminTLSBadFiles(t *testing.T) {
	dir := t.TempDir()
	srv, err := Start(config.Admin{Listen: "127.0.0.1:0", TLS: config.AdminTLS{CertFile: filepath.Join(dir, "no.crt"), KeyFile: filepath.Join(dir, "no.key")}},
		Deps{Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.HasPrefix(err.Error(), "admin.tls: load cert_file ") || !strings.Contains(err.Error(), "no such file") {
		if srv != nil {
			_ = srv.Stop()
		}
		t.Fatalf("Start with missing TLS files: %v", err)
	}
}

func TestExposureWarning(t *testing.T) {
	auth := config.AdminBasicAuth{Username: "ops", PasswordHash: "$2a$10$x"}
	tlsFiles := config.AdminTLS{CertFile: "c", KeyFile: "k"}
	tests := []struct {
		name  string
		admin config.Admin
		want  string // "" = no warning
	}{
		{"loopback v4", config.Admin{Listen: "127.0.0.1:9090"}, ""},
		{"loopback v6", config.Admin{Listen: "[::1]:9090"}, ""},
		{"localhost", config.Admin{Listen: "localhost:9090"}, ""},
		{"all interfaces", config.Admin{Listen: "0.0.0.0:9090"}, "without basic auth"},
		{"empty host", config.Admin{Listen: ":9090"}, "without basic auth"},
		{"lan address", config.Admin{Listen: "10.1.2.3:9090"}, "without basic auth"},
		{"auth without tls", config.Admin{Listen: "0.0.0.0:9090", BasicAuth: auth}, "clear text"},
		{"auth and tls", config.Admin{Listen: "0.0.0.0:9090", BasicAuth: auth, TLS: tlsFiles}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			warnExposure(slog.New(slog.NewTextHandler(&logs, nil)), tt.admin)
			got := logs.String()
			if tt.want == "" && got != "" || tt.want != "" && (!strings.Contains(got, "level=WARN") || !strings.Contains(got, tt.want)) {
				t.Errorf("logged %q, want a warning containing %q", got, tt.want)
			}
		})
	}
	// And Start logs it.
	a := startTestAdmin(t, config.Admin{Listen: "0.0.0.0:0"})
	if !strings.Contains(a.logs.String(), "level=WARN msg=\"admin API listens on a non-loopback address without basic auth") {
		t.Errorf("Start on 0.0.0.0 logged %q", a.logs.String())
	}
}

func TestPostBodyLimit(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	tests := []struct {
		name string
		size int   // body bytes
		send int64 // Content-Length; -1: chunked, length unknown
		want int
	}{
		{"no body", 0, 0, 200},
		{"small body", 2, 2, 200},
		{"exactly the limit", maxBody, maxBody, 200},
		{"too large", maxBody + 1, maxBody + 1, 413},
		{"too large, chunked", 64 << 10, -1, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, op := range []string{"pause", "resume"} {
				var body io.Reader
				if tt.size > 0 { // MultiReader hides the length from NewRequest
					body = io.MultiReader(strings.NewReader("{}" + strings.Repeat(" ", tt.size-2)))
				}
				req, _ := http.NewRequest("POST", a.url+"/v1/downstreams/printer/"+op, body)
				req.ContentLength = tt.send
				if status, _, body := call(t, nil, req); status != tt.want {
					t.Errorf("POST %s with %s: %d, want %d: %s", op, tt.name, status, tt.want, body)
				}
			}
		})
	}
}
