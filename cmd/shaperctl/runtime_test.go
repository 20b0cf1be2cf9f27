package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestRuntimeCommands: pause, resume, set and unset make the admin API's
// requests, with basic auth, and refuse bad flags before asking.
func TestRuntimeCommands(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u, _, _ := r.BasicAuth()
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b)+" "+u)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"downstream":"printer","status":"paused","paused_until":"2030-01-02T06:00:00Z"}`)
	}))
	defer srv.Close()
	admin := []string{"-admin", srv.URL, "-user", "ops", "-password", "pw"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "-downstream", "printer"}, `POST /v1/downstreams/printer/pause {} ops`},
		{[]string{"pause", "-downstream", "printer", "-for", "30m"}, `POST /v1/downstreams/printer/pause {"for":"30m"} ops`},
		{[]string{"pause", "-downstream", "printer", "-until", "2030-01-02T06:00:00Z"}, `POST /v1/downstreams/printer/pause {"until":"2030-01-02T06:00:00Z"} ops`},
		{[]string{"resume", "-downstream", "printer"}, `POST /v1/downstreams/printer/resume  ops`},
		{[]string{"set", "-downstream", "printer", "-rate", "5/s", "-capacity", "50"}, `PATCH /v1/downstreams/printer {"capacity":50,"rate":"5/s"} ops`},
		{[]string{"unset", "-downstream", "printer"}, `DELETE /v1/downstreams/printer/override  ops`},
		// A value given is sent, 0 too: the daemon names what is valid.
		{[]string{"set", "-downstream", "printer", "-rate", "5/s", "-concurrency", "0"}, `PATCH /v1/downstreams/printer {"concurrency":0,"rate":"5/s"} ops`},
		{[]string{"set", "-downstream", "printer", "-capacity", "0"}, `PATCH /v1/downstreams/printer {"capacity":0} ops`},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(tc.args, admin...), &out, &errb); code != exitOK {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errb.String())
		}
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		if last != tc.want {
			t.Errorf("%v: request %q, want %q", tc.args, last, tc.want)
		}
	}
	for _, args := range [][]string{
		{"pause"},
		{"pause", "-downstream", "p", "-for", "1m", "-until", "2030-01-01T00:00:00Z"},
		{"set", "-downstream", "p"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(args, admin...), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "shaperctl "+args[0]) {
			t.Errorf("%v: exit %d %s, want a usage error", args, code, errb.String())
		}
	}
}
