package daemon

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"testing"

	"github.com/shaperd/shaper/config"
)

// A daemon that was never Run serves the admin API from its own state: no
// NATS, not running, no shaper yet.
func TestAdminWiring(t *testing.T) {
	cfg := config.Defaults()
	cfg.Admin.Listen = "127.0.0.1:0"
	d, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := d.startAdmin(cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	d.wired.Store(&wiring{adminAddr: srv.Addr()})
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop admin: %v", err)
		}
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // goleak: no idle connections
	get := func(path string, want int) map[string]any {
		t.Helper()
		resp, err := client.Get("http://" + d.AdminAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if resp.StatusCode != want || json.Unmarshal(b, &v) != nil {
			t.Fatalf("GET %s: %d %s, want %d and JSON", path, resp.StatusCode, b, want)
		}
		return v
	}
	ready := get("/readyz", http.StatusServiceUnavailable)
	if want := []any{"NATS not connected", "not running (starting or shutting down)"}; !reflect.DeepEqual(ready["problems"], want) {
		t.Errorf("/readyz problems %v, want %v", ready["problems"], want)
	}
	if got := get("/v1/downstreams", http.StatusServiceUnavailable); got["error"] != "starting" {
		t.Errorf("/v1/downstreams before Run: %v", got)
	}
}
