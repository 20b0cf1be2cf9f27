package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// jaegerBinary is a Jaeger v2 binary: $JAEGER_BINARY (.ci/run builds one
// from the Go module proxy and sets it), or jaeger on the PATH.
func jaegerBinary(t *testing.T) string {
	if p := os.Getenv("JAEGER_BINARY"); p != "" {
		return p
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	t.Skip("no Jaeger v2 binary: set JAEGER_BINARY to one (.ci/run builds github.com/jaegertracing/jaeger/cmd/jaeger@v1.75.0 and sets it)")
	return ""
}

// runJaeger starts Jaeger v2 with in-memory storage, every port on
// loopback, and returns its OTLP/HTTP endpoint and query API base URL.
func runJaeger(t *testing.T) (otlp, query string) {
	bin := jaegerBinary(t)
	otlpAddr, queryAddr, grpcAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	conf := fmt.Sprintf(`
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, queryAddr, grpcAddr, otlpAddr)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	query = "http://" + queryAddr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, err := httpGet(query + "/api/services"); err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger not ready within 30 s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "http://" + otlpAddr, query
}

// jaegerTrace is GET /api/traces/{id}'s answer, what this test reads of it.
type jaegerTrace struct {
	Data []struct {
		Spans []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			ProcessID     string `json:"processID"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			Tags []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

// TestTracesInJaeger: a job's trace as a real tracing backend has it.
// shaperd exports to Jaeger v2 over OTLP/HTTP; Jaeger's query API then
// answers the producer's trace id with shaperd's receive span, its
// process span under the producer's span, and the CLIENT span the
// downstream's traceparent names, under the process span, all of the
// service OTEL_SERVICE_NAME names.
func TestTracesInJaeger(t *testing.T) {
	t.Parallel()
	otlp, query := runJaeger(t)
	const traceID, producerSpan = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	srv := runNATS(t)
	ds := newDownstream(t)
	startShaperdEnv(t, fmt.Sprintf(`
nats: { url: %q }
admin: { listen: "%%ADMIN%%" }
downstreams:
  pay:
    rate: 20/s
    queue: { capacity: 10, backend: jetstream }
    sink: { http: { url: %q } }
`, srv.ClientURL(), ds.URL), []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_SERVICE_NAME=shaperd-jaeger", "OTEL_BSP_SCHEDULE_DELAY=100"})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := nats.NewMsg("shaper.jobs.pay")
	m.Header["traceparent"] = []string{"00-" + traceID + "-" + producerSpan + "-01"}
	m.Data = []byte("pay 1")
	if resp, err := nc.RequestMsg(m, 5*time.Second); err != nil || resp.Header.Get("Shaper-Status") != "accepted" {
		t.Fatalf("send: %v", err)
	}
	client := strings.Split(ds.waitHits(t, 1, 10*time.Second)[0].header.Get("Traceparent"), "-")[2]

	want := map[string]bool{"receive shaper.jobs.pay": false, "process shaper.jobs.pay": false, "client": false}
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(query + "/api/traces/" + traceID)
		if err == nil {
			var tr jaegerTrace
			err = json.NewDecoder(resp.Body).Decode(&tr)
			resp.Body.Close()
			if err == nil && len(tr.Data) == 1 {
				last = fmt.Sprintf("%+v", tr.Data[0].Spans)
				var processSpan string
				for _, s := range tr.Data[0].Spans {
					parent := ""
					for _, r := range s.References {
						if r.RefType == "CHILD_OF" {
							parent = r.SpanID
						}
					}
					svc := tr.Data[0].Processes[s.ProcessID].ServiceName
					switch {
					case svc != "shaperd-jaeger":
					case s.OperationName == "process shaper.jobs.pay" && parent == producerSpan:
						want[s.OperationName], processSpan = true, s.SpanID
					case s.OperationName == "receive shaper.jobs.pay" && parent == producerSpan:
						want[s.OperationName] = true
					}
				}
				for _, s := range tr.Data[0].Spans {
					for _, r := range s.References {
						if s.SpanID == client && r.RefType == "CHILD_OF" && r.SpanID == processSpan && processSpan != "" {
							want["client"] = true
						}
					}
				}
				if want["receive shaper.jobs.pay"] && want["process shaper.jobs.pay"] && want["client"] {
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("Jaeger's trace %s: found %v; want each true. Spans: %s", traceID, want, last)
}
