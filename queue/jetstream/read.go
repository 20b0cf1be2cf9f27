package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Headers of a direct get's answers.
const (
	hdrStatus      = "Status"
	hdrDescription = "Description"
	hdrNumPending  = "Nats-Num-Pending" // a batch's end: the subject's messages after the last one sent
)

// readBatch reads up to n jobs of subject in stream, the first at or
// after sequence from, in one direct get (the stream allows direct gets;
// a batch when n > 1). It returns what it read and, for a batch, how many
// of the subject's jobs come after the last one (the server's count; -1:
// not known); none read is natsjs.ErrMsgNotFound.
func (st *Store) readBatch(ctx context.Context, stream, subject string, from uint64, n int) ([]*natsjs.RawStreamMsg, int64, error) {
	if n <= 1 {
		// One job: a plain direct get, which spares the server the count
		// of the subject a batch's end carries.
		req, err := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
		}{from, subject})
		if err != nil {
			return nil, 0, err
		}
		m, err := st.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream, req)
		if err != nil {
			return nil, 0, fmt.Errorf("read %s of stream %s: %w", subject, stream, err)
		}
		if len(m.Data) == 0 && m.Header.Get(hdrStatus) != "" {
			if m.Header.Get(hdrStatus) == "404" {
				return nil, 0, natsjs.ErrMsgNotFound
			}
			return nil, 0, fmt.Errorf("read %s of stream %s: %s %s", subject, stream, m.Header.Get(hdrStatus), m.Header.Get(hdrDescription))
		}
		r, err := rawFromDirect(m)
		if err != nil {
			return nil, 0, err
		}
		return []*natsjs.RawStreamMsg{r}, -1, nil
	}
	req, err := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
		Batch   int    `json:"batch"`
	}{from, subject, n})
	if err != nil {
		return nil, 0, err
	}
	inbox := st.nc.NewInbox()
	sub, err := st.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := st.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return nil, 0, err
	}
	var out []*natsjs.RawStreamMsg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("read %s of stream %s: %w", subject, stream, err)
		}
		if len(m.Data) == 0 {
			if status := m.Header.Get(hdrStatus); status != "" {
				switch status {
				case "204": // end of the batch
					left, err := strconv.ParseInt(m.Header.Get(hdrNumPending), 10, 64)
					if err != nil {
						left = -1
					}
					return out, left, nil
				case "404":
					if len(out) > 0 {
						return out, 0, nil
					}
					return nil, 0, natsjs.ErrMsgNotFound
				default:
					return nil, 0, fmt.Errorf("read %s of stream %s: %s %s", subject, stream, status, m.Header.Get(hdrDescription))
				}
			}
		}
		r, err := rawFromDirect(m)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
}

// rawFromDirect is the stored message a direct get answered with.
func rawFromDirect(m *nats.Msg) (*natsjs.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(natsjs.SequenceHeader), 10, 64)
	if err != nil {
		return nil, errors.New("jetstream: direct get answer without a sequence")
	}
	at, err := time.Parse(time.RFC3339Nano, m.Header.Get(natsjs.TimeStampHeaer))
	if err != nil {
		return nil, errors.New("jetstream: direct get answer without a time stamp")
	}
	return &natsjs.RawStreamMsg{Subject: m.Header.Get(natsjs.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data, Time: at}, nil
}
