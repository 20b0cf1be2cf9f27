package jetstream

import (
	"errors"
	"fmt"
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/shaperd/shaper/queue"
)

// The store's refusals of a publish map to the queue's errors: its own
// bounds are ErrFull (max_bytes as queue.max_bytes: ErrMaxBytes), the
// store out of room (its share, the server's or the account's limit) is
// ErrNoSpace, anything else neither.
func TestRefused(t *testing.T) {
	t.Parallel()
	api := func(code natsjs.ErrorCode, desc string) error {
		return fmt.Errorf("nats: %w", &natsjs.APIError{Code: 503, ErrorCode: code, Description: desc})
	}
	tests := []struct {
		name     string
		explicit bool
		err      error
		want     error
		not      error
	}{
		{"max_msgs", false, api(10077, "maximum messages exceeded"), queue.ErrFull, queue.ErrMaxBytes},
		{"queue.max_bytes", true, api(10077, "maximum bytes exceeded"), queue.ErrMaxBytes, queue.ErrNoSpace},
		{"share of the store", false, api(10077, "maximum bytes exceeded"), queue.ErrNoSpace, queue.ErrFull},
		{"server out of storage", true, api(10023, "insufficient resources"), queue.ErrNoSpace, queue.ErrFull},
		{"account out of storage", false, api(10002, "resource limits exceeded for account"), queue.ErrNoSpace, queue.ErrFull},
		{"no reservation left", false, api(10047, "insufficient storage resources available"), queue.ErrNoSpace, queue.ErrFull},
		{"other", false, api(10076, "wrong last sequence"), nil, queue.ErrNoSpace},
		{"not an API error", false, errors.New("nats: timeout"), nil, queue.ErrNoSpace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &Queue{stream: "SHAPER_p", bounds: bounds{capacity: 10, maxBytes: 1 << 20, explicit: tt.explicit}}
			got := q.refused(tt.err)
			if tt.want != nil && !errors.Is(got, tt.want) {
				t.Errorf("refused(%v) = %v, want one wrapping %v", tt.err, got, tt.want)
			}
			if errors.Is(got, tt.not) {
				t.Errorf("refused(%v) = %v, wraps %v", tt.err, got, tt.not)
			}
		})
	}
}
