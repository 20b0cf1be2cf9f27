package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthOptions are the parsed flags of health.
type healthOptions struct {
	adminFlags
	Timeout time.Duration
}

// cmdHealth is the container's HEALTHCHECK: GET /healthz, which answers
// without credentials even with admin.basic_auth set, so the probe needs
// none. Exit 0 on 200, 1 on anything else.
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("health", "[-admin URL] [-ca FILE] [-timeout 3s]", `Asks a running shaperd whether it is alive (GET /healthz on the admin API)
and exits 0 when it answers 200, 1 otherwise: the container image's
HEALTHCHECK. /healthz needs no credentials, even with admin.basic_auth set.
For a daemon with admin.tls, use an https:// URL and -ca, or set
SHAPER_ADMIN_URL and SHAPER_ADMIN_CA in the container's environment.

Example:
  shaperctl health -admin https://127.0.0.1:9090 -ca /etc/shaperd/admin-ca.pem
`, stderr)
	var o healthOptions
	o.register(fs)
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Second, "give up after this `duration` (keep it under the HEALTHCHECK's --timeout)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.Timeout <= 0 {
		return usageErr(stderr, "health", "-timeout must be positive, got %s", o.Timeout)
	}
	client, err := o.client(o.Timeout)
	if err != nil {
		return usageErr(stderr, "health", "%v", err)
	}
	if _, err := client.do(ctx, http.MethodGet, "/healthz", nil); err != nil {
		fmt.Fprintf(stderr, "shaperctl health: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "ok: %s/healthz\n", client.base)
	return exitOK
}
