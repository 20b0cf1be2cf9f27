package sink

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shaperd/shaper/queue"
	"github.com/shaperd/shaper/shaper"
)

// A dead letter carries the payload, the producer's headers and the
// Shaper-* headers; a long error is cut to 1 KiB.
func TestDeadLetterMsg(t *testing.T) {
	job := &queue.Job{ID: "j1", Downstream: "printer", Attempt: 2, Payload: []byte("doc"),
		Header: http.Header{"Content-Type": {"text/plain"}}}
	m := DeadLetterMsg(shaper.DeadLetter{Subject: "shaper.dead.printer", Job: job, Reason: shaper.ReasonFailed,
		Err: strings.Repeat("x", 2000)})
	if m.Subject != "shaper.dead.printer" || string(m.Data) != "doc" {
		t.Fatalf("message %s %q", m.Subject, m.Data)
	}
	for k, want := range map[string]string{"Content-Type": "text/plain", "Shaper-Reason": "failed",
		"Shaper-Job-Id": "j1", "Shaper-Downstream": "printer", "Shaper-Attempt": "2"} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if e := m.Header.Get("Shaper-Error"); len(e) != maxErrHeader+len("…") {
		t.Errorf("Shaper-Error is %d bytes, want it cut to %d", len(e), maxErrHeader)
	}
	// A rejected publish's stub has no id and no attempt yet.
	m = DeadLetterMsg(shaper.DeadLetter{Subject: "s", Job: &queue.Job{Downstream: "printer"}, Reason: shaper.ReasonQueueFull})
	if m.Header.Get("Shaper-Job-Id") != "" || m.Header.Get("Shaper-Attempt") != "" || m.Header.Get("Shaper-Reason") != "queue_full" {
		t.Errorf("rejection's headers %v", m.Header)
	}
}
