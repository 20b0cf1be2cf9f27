package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFmtAge(t *testing.T) {
	for _, tt := range []struct {
		seconds float64
		want    string
	}{
		{0, "0s"}, {0.9, "0s"}, {59, "59s"}, {60, "1m"}, {312.5, "5m 12s"}, {3600, "1h"},
		{3*3600 + 20*60 + 30, "3h 20m"}, {86400, "1d"}, {2*86400 + 4*3600 + 59, "2d 4h"},
	} {
		if got := fmtAge(tt.seconds); got != tt.want {
			t.Errorf("fmtAge(%v) = %q, want %q", tt.seconds, got, tt.want)
		}
	}
}

func TestDeadSummary(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	stats := func(stored int, oldest time.Time, ok bool) DeadStats {
		return func(context.Context, string) (int, time.Time, bool) { return stored, oldest, ok }
	}
	for _, tt := range []struct {
		name  string
		stats DeadStats
		want  string // the JSON; "null" when absent
		text  string
	}{
		{"no store wired", nil, "null", "–"},
		{"no store for it", stats(3, now, false), "null", "–"},
		{"empty", stats(0, now.Add(-time.Hour), true), `{"stored":0}`, "0 stored"},
		{"empty, zero oldest", stats(0, time.Time{}, true), `{"stored":0}`, "0 stored"},
		{"stored", stats(5, now.Add(-312500*time.Millisecond), true), `{"stored":5,"oldest_seconds":312.5}`, "5 stored · oldest 5m 12s"},
		{"oldest in the future (clock step)", stats(1, now.Add(time.Minute), true), `{"stored":1,"oldest_seconds":0}`, "1 stored · oldest 0s"},
		{"negative count", stats(-1, now, true), `{"stored":0}`, "0 stored"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := deadSummary(t.Context(), now, "printer", tt.stats)
			if b, _ := json.Marshal(s); string(b) != tt.want {
				t.Errorf("summary %s, want %s", b, tt.want)
			}
			if got := deadText(s); got != tt.text {
				t.Errorf("text %q, want %q", got, tt.text)
			}
		})
	}
}

// deadFixture is a server with three downstreams: printer has 5 dead letters
// stored for 3h 20m 30s (the page reads "3h 20m" for the next 29 s), zero
// has a store with nothing in it, erp has no store.
func deadFixture(t *testing.T) *testAdmin {
	t.Helper()
	a := startTestAdmin(t, adminLoopback(), "erp", "printer", "zero")
	a.dead.set("printer", 5, time.Now().Add(-(3*time.Hour + 20*time.Minute + 30*time.Second)))
	a.dead.set("zero", 0, time.Time{})
	return a
}

func TestDownstreamsDeadLetters(t *testing.T) {
	a := deadFixture(t)
	status, _, body := get(t, a.url+"/v1/downstreams")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/downstreams: %d %s", status, body)
	}
	var doc struct {
		Downstreams []map[string]json.RawMessage `json:"downstreams"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Downstreams) != 3 {
		t.Fatalf("GET /v1/downstreams: %v %s", err, body)
	}
	erp, printer, zero := doc.Downstreams[0], doc.Downstreams[1], doc.Downstreams[2]
	if string(printer["name"]) != `"printer"` || string(printer["capacity"]) != "10" {
		t.Errorf("the lane's own fields are not flat beside dead_letters: %s", body)
	}
	if _, ok := erp["dead_letters"]; ok {
		t.Errorf("erp has no store, yet dead_letters is %s", erp["dead_letters"])
	}
	if got := compact(t, string(zero["dead_letters"])); got != `{"stored":0}` {
		t.Errorf("zero: dead_letters %s, want {\"stored\":0}", got)
	}
	var p DeadLetterSummary
	if err := json.Unmarshal(printer["dead_letters"], &p); err != nil || p.Stored != 5 || p.OldestSeconds == nil {
		t.Fatalf("printer: dead_letters %s (%v)", printer["dead_letters"], err)
	}
	if age := *p.OldestSeconds; age < 12030 || age > 12030+60 {
		t.Errorf("printer: oldest_seconds %v, want about 12030", age)
	}
}

func TestStatusPageDeadLetters(t *testing.T) {
	a := deadFixture(t)
	_, _, body := get(t, a.url+"/")
	for _, want := range []string{
		`<th>Dead letters<br><span class="legend">stored · oldest; replay</span></th>`,
		`<td data-label="Dead letters"><div class="num">5 stored · oldest 3h 20m</div></td>`,
		`<td data-label="Dead letters"><div class="num">0 stored</div></td>`,
		`<td data-label="Dead letters"><div class="num">–</div></td>`,
		// The script's replay control: same origin, the page's credentials.
		`"v1/downstreams/" + encodeURIComponent(name) + "/dead/replay"`,
		`method: "POST", cache: "no-store", credentials: "same-origin"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / lacks %s", want)
		}
	}
}

// The replay route sits behind the same guards as pause: basic auth, and
// the cross-origin check that refuses a POST another site's page makes with
// the operator's cached credentials (a JSON body from a plain form needs no
// CORS preflight, so only this check stops it). "From the page" is not
// refused by a guard: 404 here, the replay route being another part's.
func TestReplayRouteGuarded(t *testing.T) {
	a := startTestAdmin(t, withAuth(t, "ops", "s3cret"), "printer")
	const replay, pause = "/v1/downstreams/printer/dead/replay", "/v1/downstreams/printer/pause"
	for _, tt := range []struct {
		name, path, site, user string
		refused                int // 0: not refused by a guard
	}{
		{"without credentials", replay, "same-origin", "", http.StatusUnauthorized},
		{"from another site", replay, "cross-site", "ops", http.StatusForbidden},
		{"from a sibling subdomain", replay, "same-site", "ops", http.StatusForbidden},
		{"from the page", replay, "same-origin", "ops", 0},
		{"not from a browser", replay, "", "ops", 0},
		{"pause from another site", pause, "cross-site", "ops", http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, a.url+tt.path, strings.NewReader(`{"rate":"2/s"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tt.site != "" {
				req.Header.Set("Sec-Fetch-Site", tt.site)
			}
			if tt.user != "" {
				req.SetBasicAuth(tt.user, "s3cret")
			}
			status, _, body := call(t, nil, req)
			if status == http.StatusForbidden && !strings.Contains(body, `"error": "POST from another site's page refused`) {
				t.Errorf("403 body %s, want the JSON error", body)
			}
			guarded := status == http.StatusUnauthorized || status == http.StatusForbidden
			if (tt.refused != 0 && status != tt.refused) || (tt.refused == 0 && guarded) {
				t.Errorf("POST %s: %d %s, want refused %d", tt.path, status, body, tt.refused)
			}
		})
	}
}
