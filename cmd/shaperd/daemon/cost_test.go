package daemon

import (
	"net/http"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper"
)

func TestParseJobCost(t *testing.T) {
	cases := []struct {
		name, cost string // "" = header absent
		want       int    // 0 = bad_request
	}{
		{"absent", "", 1},
		{"one", "1", 1},
		{"batch", "25", 25},
		{"max", "1000000", 1000000},
		{"zero", "0", 0},
		{"negative", "-3", 0},
		{"fraction", "2.5", 0},
		{"garbage", "lots", 0},
		{"over bound", "1000001", 0},
		{"spaces", " 3", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := http.Header{}
			if tc.cost != "" {
				hdr.Set("Shaper-Cost", tc.cost)
			}
			job, _, rej := parseJob(time.Now(), testLimits, "shaper.jobs.p", hdr, []byte("x"))
			if tc.want == 0 {
				if rej == nil || rej.reason != shaper.ReasonBadRequest {
					t.Fatalf("Shaper-Cost %q: rejection %+v, want bad_request", tc.cost, rej)
				}
				return
			}
			if rej != nil {
				t.Fatalf("Shaper-Cost %q rejected: %v", tc.cost, rej.err)
			}
			if job.Cost != tc.want {
				t.Errorf("Shaper-Cost %q: cost %d, want %d", tc.cost, job.Cost, tc.want)
			}
			if job.Header.Get("Shaper-Cost") != "" {
				t.Error("Shaper-Cost passed on to the downstream")
			}
		})
	}
}
