package admin

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// sendJSON makes one request with a JSON body and returns status and body.
func sendJSON(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	status, _, got := call(t, nil, req)
	return status, got
}

// TestTimedPauseBodies: a pause takes {"for"} or {"until"}; both, a bad
// value or an unknown field is a 400 naming the field.
func TestTimedPauseBodies(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, body string
		status     int
		want       string // in the answer
	}{
		{"for", `{"for":"30m"}`, 200, `"paused_until"`},
		{"until", `{"until":"` + future + `"}`, 200, `"paused_until": "` + strings.TrimSuffix(future, "Z")},
		{"both", `{"for":"30m","until":"` + future + `"}`, 400, `for, until: give one of the two, not both`},
		{"bad for", `{"for":"soon"}`, 400, `for: \"soon\" is not a duration`},
		{"negative for", `{"for":"-1m"}`, 400, `for: \"-1m\" is not a duration`},
		{"bad until", `{"until":"tomorrow"}`, 400, `until: \"tomorrow\" is not an RFC 3339 time`},
		{"past until", `{"until":"2001-01-01T00:00:00Z"}`, 400, `until: 2001-01-01T00:00:00Z must be in the future`},
		{"unknown field", `{"four":"30m"}`, 400, `four: unknown field`},
		{"wrong type", `{"for":30}`, 400, `for: expected a string, got a JSON number`},
		{"not JSON", `30m`, 400, `body: not a JSON object`},
	} {
		status, body := sendJSON(t, "POST", a.url+"/v1/downstreams/printer/pause", tc.body)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, status, body, tc.status, tc.want)
		}
	}
	if st := a.lanes.Lanes()[0]; !st.Paused || st.PausedUntil == nil {
		t.Errorf("status after timed pauses: %+v", st)
	}
	if status, body := sendJSON(t, "POST", a.url+"/v1/downstreams/nope/pause", `{"for":"1m"}`); status != 404 {
		t.Errorf("unknown downstream: %d %s", status, body)
	}
	if logs := a.logs.String(); !strings.Contains(logs, `msg="downstream paused through the admin API" downstream=printer by="anonymous (127.0.0.1:`) ||
		!strings.Contains(logs, `paused="no → until `) {
		t.Errorf("audit lines missing:\n%s", logs)
	}
}

// TestResumeBodies: a resume takes no body; {} is as none, and anything
// else (a pause's for, most likely) is a 400, never ignored.
func TestResumeBodies(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	for _, tc := range []struct {
		name, body string
		status     int
		want       string // in the answer
	}{
		{"none", ``, 200, `"status": "resumed"`},
		{"empty object", ` {} `, 200, `"status": "resumed"`},
		{"for", `{"for":"1m"}`, 400, `resume takes no body (send none, or {}): for: unknown field`},
		{"until", `{"until":"2001-01-01T00:00:00Z"}`, 400, `resume takes no body (send none, or {}): until: unknown field`},
		{"not JSON", `now`, 400, `resume takes no body (send none, or {}): body: not a JSON object`},
		{"not an object", `[]`, 400, `resume takes no body (send none, or {})`},
	} {
		if status, body := sendJSON(t, "POST", a.url+"/v1/downstreams/printer/pause", ``); status != 200 {
			t.Fatalf("pause: %d %s", status, body)
		}
		status, body := sendJSON(t, "POST", a.url+"/v1/downstreams/printer/resume", tc.body)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, status, body, tc.status, tc.want)
		}
		if st := a.lanes.Lanes()[0]; st.Paused != (tc.status != 200) {
			t.Errorf("%s: paused = %v after the resume", tc.name, st.Paused)
		}
	}
}

// TestOverrideRoutes: PATCH validates like the config and answers what is
// overridden; DELETE removes it; unknown downstreams are 404.
func TestOverrideRoutes(t *testing.T) {
	a := startTestAdmin(t, adminLoopback(), "printer")
	url := a.url + "/v1/downstreams/printer"
	for _, tc := range []struct {
		name, method, url, body string
		status                  int
		want                    string
	}{
		{"rate", "PATCH", url, `{"rate":"20/s"}`, 200, `"rate": 20`},
		{"concurrency and capacity", "PATCH", url, `{"concurrency":2,"capacity":50}`, 200, `"capacity": 50`},
		{"bad rate", "PATCH", url, `{"rate":"fast"}`, 400, `rate: \"fast\" is not a rate`},
		{"rate out of range", "PATCH", url, `{"rate":"2000000/s"}`, 400, `rate: must be 1/h..1000000/s`},
		{"zero concurrency", "PATCH", url, `{"concurrency":0}`, 400, `concurrency: must be 1..10000, got 0`},
		{"capacity as a string", "PATCH", url, `{"capacity":"50"}`, 400, `capacity: expected a whole number, got a JSON string`},
		{"fractional capacity", "PATCH", url, `{"capacity":2.5}`, 400, `capacity: expected a whole number`},
		{"unknown field", "PATCH", url, `{"burst":5}`, 400, `burst: unknown field`},
		{"empty", "PATCH", url, `{}`, 400, `body: give at least one of rate, concurrency, capacity, max_jobs`},
		{"max_jobs out of range", "PATCH", url, `{"max_jobs":1}`, 400, `max_jobs: must be 2..10000, got 1`},
		{"the lane refuses it", "PATCH", url, `{"capacity":1}`, 400, `capacity below max cost 2`},
		{"unknown downstream", "PATCH", a.url + "/v1/downstreams/nope", `{"rate":"1/s"}`, 404, `no downstream named \"nope\"`},
		{"unset", "DELETE", url + "/override", ``, 200, `"status": "override removed"`},
		{"unset unknown", "DELETE", a.url + "/v1/downstreams/nope/override", ``, 404, `no downstream named`},
	} {
		status, body := sendJSON(t, tc.method, tc.url, tc.body)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.name, status, body, tc.status, tc.want)
		}
	}
	if st := a.lanes.Lanes()[0]; st.Override != nil || st.Rate != 2 {
		t.Errorf("status after unset: %+v", st)
	}
	if logs := a.logs.String(); !strings.Contains(logs, `msg="downstream overridden through the admin API" downstream=printer by="anonymous (127.0.0.1:`) ||
		!strings.Contains(logs, `rate="2/s → 20/s"`) || !strings.Contains(logs, `capacity="10 → 50"`) {
		t.Errorf("audit lines missing:\n%s", logs)
	}
}
