package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/shaperd/shaper/cmd/shaperd/admin/api"
)

// The environment variables the admin flags fall back to. shaperd itself
// reads none of them (they are no config keys), so one container
// environment serves both the daemon and `docker exec ... shaperctl`.
const (
	envAdminURL      = "SHAPER_ADMIN_URL"
	envAdminUser     = "SHAPER_ADMIN_USER"
	envAdminPassword = "SHAPER_ADMIN_PASSWORD"
	envAdminCA       = "SHAPER_ADMIN_CA"
)

const defaultAdmin = "http://127.0.0.1:9090"

// adminAuthHelp ends the -h text of every command that calls the admin API.
const adminAuthHelp = `
A daemon with admin.basic_auth wants credentials, admin.tls an https:// URL:
  export SHAPER_ADMIN_USER=ops SHAPER_ADMIN_PASSWORD='...'
  shaperctl status -admin https://shaper.internal:9090 -ca /etc/shaper/ca.pem
`

// adminFlags are the flags of every command that calls the admin API.
type adminFlags struct {
	Admin    string
	User     string
	Password string
	CA       string
}

// adminFlagNames are the flags register adds, which every such command takes.
var adminFlagNames = []string{"admin", "user", "password", "ca"}

// register adds -admin, -user, -password and -ca to fs. Each falls back to
// its env var when the flag is not given; the flag wins.
func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.Admin, "admin", "", "admin API base `URL` (admin.listen in the daemon's config; https:// when it sets admin.tls;\n"+
		"http://user:password@host works too) (env "+envAdminURL+", default "+defaultAdmin+")")
	fs.StringVar(&a.User, "user", "", "basic-auth user `name` (admin.basic_auth.username) (env "+envAdminUser+")")
	fs.StringVar(&a.Password, "password", "", "basic-auth `password` (env "+envAdminPassword+": keeps it out of ps and shell history)")
	fs.StringVar(&a.CA, "ca", "", "PEM `file` with the CA that signed the admin API's certificate (admin.tls), or the certificate\n"+
		"itself; only it is trusted then (env "+envAdminCA+"; default the system's CAs)")
}

// adminClient calls one admin API: base URL without credentials, the
// credentials apart, so no message can show the password.
type adminClient struct {
	base     string // scheme://host[:port][/prefix], no user info, no trailing /
	user     string
	password string
	ca       string // the -ca file, "" for the system's CAs
	http     *http.Client
}

// client resolves the flags, the URL's user info and the env vars into a
// client. Each of user and password is the flag's, else the URL's, else the
// env var's. The error is a usage problem, naming the flag.
func (a adminFlags) client(timeout time.Duration) (*adminClient, error) {
	raw := firstSet(a.Admin, os.Getenv(envAdminURL), defaultAdmin)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := neturl.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("-admin %q: want http://HOST:PORT or https://HOST:PORT (admin.listen in the daemon's config)", redactedURL(raw))
	}
	c := &adminClient{ca: firstSet(a.CA, os.Getenv(envAdminCA))}
	urlPass, _ := u.User.Password()
	c.user = firstSet(a.User, u.User.Username(), os.Getenv(envAdminUser))
	c.password = firstSet(a.Password, urlPass, os.Getenv(envAdminPassword))
	if c.password != "" && c.user == "" {
		return nil, errors.New("-password needs -user NAME (or " + envAdminUser + ")")
	}
	u.User = nil
	c.base = strings.TrimRight(u.String(), "/")
	tr := &http.Transport{DisableKeepAlives: true}
	if c.ca != "" {
		if u.Scheme != "https" {
			return nil, fmt.Errorf("-ca is for an https:// admin URL (a daemon with admin.tls), got -admin %s", c.base)
		}
		if tr.TLSClientConfig, err = caConfig(c.ca); err != nil {
			return nil, err
		}
	}
	c.http = &http.Client{Timeout: timeout, Transport: tr}
	return c, nil
}

// caConfig trusts only the certificates in the PEM file.
func caConfig(file string) (*tls.Config, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-ca %s: no PEM certificate in it (want -----BEGIN CERTIFICATE-----)", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// redactedURL is u with its password hidden.
func redactedURL(u string) string {
	p, err := neturl.Parse(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	return strings.TrimRight(p.Redacted(), "/")
}

// do sends one request and returns the body of a 2xx answer, or an error
// that says what to check.
func (c *adminClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad -admin %q: %w", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s%s: %w", c.base, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, c.refusal(resp.StatusCode, b))
	}
	return b, nil
}

// refusal explains a non-2xx answer: the admin API's JSON error, and what
// to do for the answers a wrong flag causes.
func (c *adminClient) refusal(status int, body []byte) string {
	var e api.Error
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	switch {
	case status == http.StatusUnauthorized && c.user == "":
		return e.Error + "\nthe admin API needs credentials: pass -user NAME and -password (or set " +
			envAdminUser + " and " + envAdminPassword + ")"
	case status == http.StatusUnauthorized:
		return e.Error + fmt.Sprintf("\nthe admin API refused user %q with that password: check -user and -password", c.user)
	case status == http.StatusBadRequest && strings.Contains(e.Error, "HTTP request to an HTTPS server"):
		return e.Error + "\nthe admin API serves HTTPS (admin.tls): use -admin " +
			strings.Replace(c.base, "http://", "https://", 1) + " (and -ca FILE unless a public CA signed its certificate)"
	}
	return e.Error
}

// transportError explains a request that got no answer: an untrusted
// certificate, plain HTTP on an https:// URL, or nothing listening. The
// URL in err has no password: c.base has none.
func (c *adminClient) transportError(err error) error {
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &badHost):
		return fmt.Errorf("the admin API's certificate does not name the host in -admin %s: %w\n"+
			"use a host name or IP address the certificate lists (admin.tls.cert_file)", c.base, err)
	case errors.As(err, &unknownCA) && c.ca != "":
		return fmt.Errorf("the admin API's certificate at %s is not signed by the CA in -ca %s: %w", c.base, c.ca, err)
	case errors.As(err, &unknownCA), errors.As(err, &verify):
		return fmt.Errorf("the admin API's certificate at %s is not trusted: %w\n"+
			"pass the CA that signed it (or the certificate itself, if self-signed) with -ca FILE", c.base, err)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("the admin API at %s answers plain HTTP (admin.tls is not set): use -admin %s",
			c.base, strings.Replace(c.base, "https://", "http://", 1))
	}
	return fmt.Errorf("cannot reach the admin API at %s: %w\nis shaperd running? is -admin right (admin.listen in its config)?", c.base, err)
}
