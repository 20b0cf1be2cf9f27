package natsout

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/shaperd/shaper/shaper/outcome"
)

// appendRecord appends rec as JSON to b: the bytes json.Marshal gives
// (same fields, order, omissions and escapes), written without
// reflection or allocations, as every event encodes one. A time that
// JSON cannot hold (a year outside 0..9999) falls back to json.Marshal,
// and its error.
func appendRecord(b []byte, rec *outcome.Record) ([]byte, error) {
	n0 := len(b)
	b = append(b, `{"job_id":`...)
	b = appendString(b, rec.JobID)
	b = append(b, `,"downstream":`...)
	b = appendString(b, rec.Downstream)
	b = append(b, `,"state":`...)
	b = appendString(b, string(rec.State))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(rec.Attempts), 10)
	ok := true
	b, ok = appendTime(b, `,"accepted_at":`, rec.AcceptedAt, ok)
	b, ok = appendTime(b, `,"not_before":`, rec.NotBefore, ok)
	b, ok = appendTime(b, `,"started_at":`, rec.StartedAt, ok)
	b, ok = appendTime(b, `,"ended_at":`, rec.EndedAt, ok)
	if !ok {
		data, err := json.Marshal(rec)
		return append(b[:n0], data...), err
	}
	if rec.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, rec.Error)
	}
	if rec.DeadLetterSeq != 0 {
		b = append(b, `,"dead_letter_seq":`...)
		b = strconv.AppendUint(b, rec.DeadLetterSeq, 10)
	}
	if r := rec.Result; r != nil {
		b = append(b, `,"result":`...)
		b = appendResult(b, r)
	}
	if rec.BatchID != "" {
		b = append(b, `,"batch_id":`...)
		b = appendString(b, rec.BatchID)
	}
	return append(b, '}'), nil
}

// appendResult appends r as JSON to b, as json.Marshal does: the
// headers by sorted name, the body in standard base64.
func appendResult(b []byte, r *outcome.Result) []byte {
	b = append(b, '{')
	if r.StatusCode != 0 {
		b = append(b, `"status_code":`...)
		b = strconv.AppendInt(b, int64(r.StatusCode), 10)
		b = append(b, ',')
	}
	if len(r.Headers) > 0 {
		b = append(b, `"headers":{`...)
		var arr [8]string
		names := arr[:0]
		for k := range r.Headers {
			names = append(names, k)
		}
		slices.Sort(names)
		for i, k := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, r.Headers[k])
		}
		b = append(b, "},"...)
	}
	if len(r.Body) > 0 {
		b = append(b, `"body_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Body)
		b = append(b, `",`...)
	}
	b = append(b, `"bytes":`...)
	b = strconv.AppendInt(b, int64(r.Bytes), 10)
	if r.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

// appendTime appends key and t as JSON to b unless t is zero (omitzero).
// ok turns false, and stays so, when t is out of JSON's range: a year
// outside 0..9999 or a zone offset of a day or more (time.MarshalJSON's
// errors).
func appendTime(b []byte, key string, t time.Time, ok bool) ([]byte, bool) {
	if !ok || t.IsZero() {
		return b, ok
	}
	b = append(b, key...)
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	if b[n0+len("9999")] != '-' {
		return b, false
	}
	if b[len(b)-1] != 'Z' {
		c := b[len(b)-len("Z07:00")]
		h := b[len(b)-len("07:00"):]
		if ('0' <= c && c <= '9') || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			return b, false
		}
	}
	return append(b, '"'), true
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string to b, escaped as json.Marshal
// escapes it: quotes, backslashes and control characters, the HTML
// characters <, > and &, U+2028 and U+2029; an invalid UTF-8 byte
// becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
