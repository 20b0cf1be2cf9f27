package natsout

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper/outcome"
)

// awkward are strings that need JSON's escapes: quotes, backslashes,
// control characters, HTML characters, U+2028/U+2029, invalid UTF-8.
var awkward = []string{
	"", "plain", `say "hi" \ bye`, "line\none\r\ttab\bback\fform\x00nul\x1fus\x7fdel",
	"<script>&amp;</script>", "sep\u2028para\u2029end", "bad \xff\xfe utf8 \xc3", "é中文😀", "\xe2\x80",
}

// records are records with every field set or unset, in many zones.
func records() []outcome.Record {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	zone := time.FixedZone("x", -(9*3600 + 30*60))
	full := outcome.Record{JobID: "a1", Downstream: "pay", State: outcome.Failed, Attempts: 12,
		AcceptedAt: t0, NotBefore: t0.Add(time.Second).In(zone), StartedAt: t0.Add(1500 * time.Millisecond).Local(),
		EndedAt: time.Date(2026, 3, 4, 5, 6, 9, 0, time.FixedZone("y", 14*3600)),
		Error:   "boom", DeadLetterSeq: 1 << 60,
		Result: &outcome.Result{StatusCode: 503, Headers: map[string]string{"Content-Type": "text/plain", "ETag": `"x"`, "Location": "/a?b=1&c=<2>"},
			Body: []byte("over\x00\xff"), Bytes: 1 << 40, Truncated: true}, BatchID: "b\"1"}
	recs := []outcome.Record{
		{},
		{JobID: "q", Downstream: "d", State: outcome.Queued, AcceptedAt: t0},
		full,
	}
	r := full
	r.Result = &outcome.Result{} // an answer with nothing kept
	recs = append(recs, r)
	r = full
	r.Result = &outcome.Result{Headers: map[string]string{}, Body: []byte{}, Bytes: 0}
	recs = append(recs, r)
	r = full
	r.Result = nil
	r.Attempts = -3
	recs = append(recs, r)
	for _, s := range awkward {
		r := full
		r.JobID, r.Downstream, r.State, r.Error = s, s+"x", outcome.State(s), s
		r.Result = &outcome.Result{Headers: map[string]string{s: s, s + "2": "v"}, Body: []byte(s), Bytes: len(s)}
		recs = append(recs, r)
	}
	return recs
}

// appendRecord writes the bytes json.Marshal writes, which decode to the
// same record.
func TestAppendRecordIsJSON(t *testing.T) {
	for i, rec := range records() {
		checkEncoding(t, i, &rec)
	}
}

// Random strings and times encode as json.Marshal encodes them.
func TestAppendRecordRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := []byte("a\"\\<>&\n\x01\x7f\xc3\xa9\xe2\x80\xa8\xff ")
	str := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = pick[rng.IntN(len(pick))]
		}
		return string(b)
	}
	tm := func() time.Time {
		if rng.IntN(4) == 0 {
			return time.Time{}
		}
		zone := time.FixedZone("z", (rng.IntN(48)-24)*1800)
		return time.Unix(rng.Int64N(1<<36), rng.Int64N(1e9)).In(zone)
	}
	for i := range 2000 {
		rec := outcome.Record{JobID: str(), Downstream: str(), State: outcome.State(str()), Attempts: rng.IntN(100),
			AcceptedAt: tm(), NotBefore: tm(), StartedAt: tm(), EndedAt: tm(), Error: str(), DeadLetterSeq: rng.Uint64N(3)}
		if rng.IntN(2) == 0 {
			rec.BatchID = str()
		}
		if rng.IntN(2) == 0 {
			rec.Result = &outcome.Result{StatusCode: rng.IntN(600), Headers: map[string]string{str(): str(), str(): str()},
				Body: []byte(str()), Bytes: rng.IntN(1000), Truncated: rng.IntN(2) == 0}
		}
		checkEncoding(t, i, &rec)
	}
}

// A time JSON cannot hold fails as json.Marshal fails, and leaves what
// was in the buffer.
func TestAppendRecordBadTime(t *testing.T) {
	for _, tm := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600))} {
		rec := outcome.Record{JobID: "a", EndedAt: tm}
		_, want := json.Marshal(&rec)
		got, err := appendRecord([]byte("kept"), &rec)
		if want == nil || err == nil || err.Error() != want.Error() || string(got) != "kept" {
			t.Fatalf("%v: appendRecord %q, %v; json.Marshal's error %v", tm, got, err, want)
		}
	}
}

// appendRecord knows every field of Record and Result: one added to them
// must be added to it (and to records above).
func TestAppendRecordKnowsEveryField(t *testing.T) {
	fields := func(v any) string {
		var names []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			names = append(names, f.Name+" "+f.Type.String()+" "+string(f.Tag))
		}
		return strings.Join(names, "\n")
	}
	wantRecord := `JobID string json:"job_id"
Downstream string json:"downstream"
State outcome.State json:"state"
Attempts int json:"attempts"
AcceptedAt time.Time json:"accepted_at,omitzero"
NotBefore time.Time json:"not_before,omitzero"
StartedAt time.Time json:"started_at,omitzero"
EndedAt time.Time json:"ended_at,omitzero"
Error string json:"error,omitempty"
DeadLetterSeq uint64 json:"dead_letter_seq,omitempty"
Result *outcome.Result json:"result,omitempty"
BatchID string json:"batch_id,omitempty"`
	wantResult := `StatusCode int json:"status_code,omitempty"
Headers map[string]string json:"headers,omitempty"
Body []uint8 json:"body_base64,omitempty"
Bytes int json:"bytes"
Truncated bool json:"truncated,omitempty"`
	if got := fields(outcome.Record{}); got != wantRecord {
		t.Errorf("outcome.Record's fields changed; appendRecord (encode.go) writes:\n%s\nthe record has:\n%s", wantRecord, got)
	}
	if got := fields(outcome.Result{}); got != wantResult {
		t.Errorf("outcome.Result's fields changed; appendResult (encode.go) writes:\n%s\nthe result has:\n%s", wantResult, got)
	}
}

// checkEncoding checks that appendRecord, after a prefix, appends what
// json.Marshal gives for rec, and that it decodes to what json.Marshal's
// bytes decode to.
func checkEncoding(t *testing.T, i int, rec *outcome.Record) {
	t.Helper()
	want, err := json.Marshal(rec)
	if err != nil {
		t.Fatalf("record %d: json.Marshal: %v", i, err)
	}
	got, err := appendRecord([]byte("prefix"), rec)
	if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("record %d: appendRecord\n%s (%v)\njson.Marshal\n%s", i, got, err, want)
	}
	var a, b outcome.Record
	if err := json.Unmarshal(got[len("prefix"):], &a); err != nil {
		t.Fatalf("record %d: decoding %s: %v", i, got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("record %d decodes to %+v, json.Marshal's to %+v (%v)", i, a, b, err)
	}
}

// FuzzAppendRecord: any strings encode as json.Marshal encodes them.
func FuzzAppendRecord(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s, 7, []byte(s))
	}
	f.Fuzz(func(t *testing.T, id, msg string, code int, body []byte) {
		rec := outcome.Record{JobID: id, Downstream: "d", State: outcome.Retrying, Error: msg,
			Result: &outcome.Result{StatusCode: code, Headers: map[string]string{msg: id}, Body: body, Bytes: len(body)}}
		checkEncoding(t, 0, &rec)
	})
}

// benchRecord is a succeeded job's record, as most events carry.
func benchRecord() outcome.Record {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	return outcome.Record{JobID: "mXhY22bep2ILqbikPi2SY5", Downstream: "printer", State: outcome.Succeeded, Attempts: 1,
		AcceptedAt: t0, StartedAt: t0.Add(time.Second), EndedAt: t0.Add(2 * time.Second),
		Result: &outcome.Result{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"},
			Body: []byte(`{"ok":true}`), Bytes: 11}}
}

// BenchmarkEncodeRecord compares appendRecord with json.Marshal.
func BenchmarkEncodeRecord(b *testing.B) {
	rec := benchRecord()
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = appendRecord(buf[:0], &rec)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&rec)
		}
	})
}

// BenchmarkTellerEvent publishes events with nobody listening.
func BenchmarkTellerEvent(b *testing.B) {
	nc, _ := runNATS(b)
	tell := NewTeller(nc, "")
	rec := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		if err := tell.Event(&rec); err != nil {
			b.Fatal(err)
		}
	}
}
