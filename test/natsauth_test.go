package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	natsserver "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/shaperd/shaper/cmd/shaperd/daemon"
	"github.com/shaperd/shaper/config"
)

// credCase is one way of authenticating to NATS: how the server requires
// it, the daemon's nats: keys, and the producer's options.
type credCase struct {
	name     string
	server   func(*server.Options)
	natsYAML string
	producer []nats.Option
	secret   string // must not appear in the daemon's logs
}

// The daemon connects with each NATS credential it supports — token, nkey
// seed file, TLS with a client certificate — to a server that requires
// it, and a job flows end to end; the secret is in no log line.
func TestNATSCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []credCase{
		{
			name:     "token",
			server:   func(o *server.Options) { o.Authorization = "s3cret-token" },
			natsYAML: `token: "s3cret-token"`,
			producer: []nats.Option{nats.Token("s3cret-token")},
			secret:   "s3cret-token",
		},
		nkeyCase(t, dir),
		credsCase(t, dir),
		tlsCase(t, dir),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := natsserver.DefaultTestOptions
			opts.Port = -1
			tc.server(&opts)
			srv := natsserver.RunServer(&opts)
			t.Cleanup(srv.Shutdown)
			url := srv.ClientURL()
			if opts.TLSConfig != nil {
				url = strings.Replace(url, "nats://", "tls://", 1)
			}
			ds := newDownstream(t)
			yaml := `
nats: { url: "` + url + `", ` + tc.natsYAML + ` }
admin: { listen: "127.0.0.1:0" }
downstreams:` + lane("printer", "50/s", 10, "", ds.URL)
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			logs := &capturedLog{}
			d, err := daemon.New(cfg, daemon.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			defer func() { cancel(); <-done }()
			select {
			case <-d.Ready():
			case err := <-done:
				done <- err // for the deferred wait
				t.Fatalf("daemon stopped before it was ready: %v", err)
			}
			waitFor(t, 10*time.Second, func() bool { s, _ := readyz(t, "http://"+d.AdminAddr()); return s == 200 }, "the daemon to connect with its credential")
			nc, err := nats.Connect(url, tc.producer...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			resp, err := nc.Request("shaper.jobs.printer", []byte("x"), 5*time.Second)
			if err != nil || resp.Header.Get("Shaper-Status") != "accepted" {
				t.Fatalf("request: %v", err)
			}
			ds.waitHits(t, 1, 5*time.Second)
			if tc.secret != "" && strings.Contains(logs.String(), tc.secret) {
				t.Errorf("a log line carries the %s secret", tc.name)
			}
		})
	}
}

func nkeyCase(t *testing.T, dir string) credCase {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	return credCase{
		name:     "nkey",
		server:   func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
		natsYAML: `nkey: "` + seedFile + `"`,
		producer: []nats.Option{opt},
		secret:   string(seed),
	}
}

// credsCase: decentralised auth. The test issues an operator, an account
// and a user; the server trusts the operator and resolves the account from
// memory; the daemon reads the user's JWT and seed from a creds file.
func credsCase(t *testing.T, dir string) credCase {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	op, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	useed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(dir, "user.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return credCase{
		name: "creds file",
		server: func(o *server.Options) {
			r := &server.MemAccResolver{}
			if err := r.Store(apub, ajwt); err != nil {
				t.Fatal(err)
			}
			o.TrustedOperators, o.AccountResolver = []*jwt.OperatorClaims{op}, r
		},
		natsYAML: `creds: "` + credsFile + `"`,
		producer: []nats.Option{nats.UserCredentials(credsFile)},
		secret:   string(useed),
	}
}

func tlsCase(t *testing.T, dir string) credCase {
	ca, caKey := newCert(t, nil, nil, "shaper test CA", true)
	srvCert, srvKey := newCert(t, ca, caKey, "127.0.0.1", false)
	cliCert, cliKey := newCert(t, ca, caKey, "shaperd", false)
	write := func(name string, blocks ...*pem.Block) string {
		p := filepath.Join(dir, name)
		var b []byte
		for _, blk := range blocks {
			b = append(b, pem.EncodeToMemory(blk)...)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	certFile := write("client.pem", &pem.Block{Type: "CERTIFICATE", Bytes: cliCert.Raw})
	keyFile := write("client-key.pem", keyBlock(t, cliKey))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	serverTLS := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	return credCase{
		name: "tls client certificate",
		server: func(o *server.Options) {
			o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = serverTLS, true, true, 2
		},
		natsYAML: `tls: { ca: "` + caFile + `", cert: "` + certFile + `", key: "` + keyFile + `" }`,
		producer: []nats.Option{nats.RootCAs(caFile), nats.ClientCert(certFile, keyFile)},
	}
}

// newCert makes an ECDSA certificate signed by parent (self-signed when
// parent is nil), for 127.0.0.1.
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func keyBlock(t *testing.T, key *ecdsa.PrivateKey) *pem.Block {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}
