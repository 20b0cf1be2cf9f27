package bulk

import (
	"encoding/base64"
	"errors"
	"strconv"
	"unicode/utf8"
)

// The fields of a job object, as bits of jobState.seen.
const (
	fieldData = 1 << iota
	fieldBase64
	fieldHeaders
)

// maxName bounds the bytes of a name quoted in an error.
const maxName = 64

// jobState collects one job object's fields as they are read.
type jobState struct {
	seen     int               // the fields met, as field bits
	data     []byte            // the "data" value as written
	b64      []byte            // the "data_base64" string, quotes included
	b64Flags int               // what the "data_base64" string holds
	headers  map[string]string // the headers so far
	bad      string            // the first thing wrong with the job, "" while none is
}

// job reads the job at i (not whitespace) as job index and returns the
// offset past it. A syntax error is the error; a bad job is the Job's Err.
func (p *parser) job(i, index int) (int, Job, error) {
	job := Job{Index: index}
	if p.buf[i] != '{' {
		end, err := p.value(i)
		if err == nil {
			job.Err = p.jobErr(index, "is "+kind(p.buf[i])+`, not an object; a job is {"data": …} or {"data_base64": "…"}`)
		}
		return end, job, err
	}
	var st jobState
	i, err := p.members(i, &st)
	if err != nil {
		return i, job, err
	}
	job.Data, job.Headers, job.Err = p.finish(&st, index)
	return i, job, nil
}

// members reads the fields of the job object whose '{' is at i.
func (p *parser) members(i int, st *jobState) (int, error) {
	return p.object(i, `a field name in quotes ("data", "data_base64" or "headers")`, "',' or '}' after a job field",
		func(i int, key []byte, flags int) (int, error) { return p.field(i, key, flags, st) })
}

// object reads the members of the object whose '{' is at i, each value by
// member (given the member's quoted name, its flags, and the index of its
// value); wantName and wantAfter say what was expected where a name, or
// what follows a member, is not found.
func (p *parser) object(i int, wantName, wantAfter string, member func(i int, key []byte, flags int) (int, error)) (int, error) {
	i = p.ws(i + 1)
	if p.at(i) == '}' {
		return i + 1, nil
	}
	for {
		if p.at(i) != '"' {
			return i, p.fail(i, wantName)
		}
		ks := i
		var flags int
		var err error
		if i, flags, err = p.str(i); err != nil {
			return i, err
		}
		key := p.buf[ks:i]
		if i, err = p.colon(i); err != nil {
			return i, err
		}
		if i, err = member(i, key, flags); err != nil {
			return i, err
		}
		i = p.ws(i)
		switch p.at(i) {
		case ',':
			i = p.ws(i + 1)
		case '}':
			return i + 1, nil
		default:
			return i, p.fail(i, wantAfter)
		}
	}
}

// field reads the value at i of the field whose quoted name is key.
func (p *parser) field(i int, key []byte, flags int, st *jobState) (int, error) {
	name := key[1 : len(key)-1]
	if flags&hasEscape != 0 {
		name = []byte(text(key, flags))
	}
	bit := 0
	switch string(name) {
	case "data":
		bit = fieldData
	case "data_base64":
		bit = fieldBase64
	case "headers":
		bit = fieldHeaders
	default:
		if st.bad == "" {
			st.bad = "unknown field " + quoteName(text(key, flags)) + `; a job has "data" or "data_base64", and optionally "headers"`
		}
		return p.value(i)
	}
	if st.seen&bit != 0 && st.bad == "" {
		st.bad = "field " + strconv.Quote(string(name)) + " appears twice; give each field once"
	}
	st.seen |= bit
	start := i
	var err error
	switch {
	case bit == fieldData:
		i, err = p.value(i)
		st.data = p.buf[start:i:i]
	case bit == fieldHeaders:
		i, err = p.headers(i, st)
	case p.at(i) == '"':
		i, st.b64Flags, err = p.str(i)
		st.b64 = p.buf[start:i]
	default:
		if st.bad == "" && i < len(p.buf) {
			st.bad = `"data_base64" is ` + kind(p.buf[i]) + "; want a string of standard base64"
		}
		i, err = p.value(i)
	}
	return i, err
}

// headers reads the "headers" value at i: an object of string values, or
// null, which counts as no headers.
func (p *parser) headers(i int, st *jobState) (int, error) {
	switch c := p.at(i); c {
	case '{':
	case 'n':
		return p.value(i)
	default:
		if st.bad == "" && i < len(p.buf) {
			st.bad = `"headers" is ` + kind(c) + "; want an object of string values"
		}
		return p.value(i)
	}
	return p.object(i, "a header name in quotes", "',' or '}' after a header",
		func(i int, key []byte, flags int) (int, error) { return p.header(i, key, flags, st) })
}

// header reads the value at i of the header whose quoted name is key.
func (p *parser) header(i int, key []byte, kflags int, st *jobState) (int, error) {
	if c := p.at(i); c != '"' {
		if st.bad == "" && i < len(p.buf) {
			st.bad = `"headers".` + quoteName(text(key, kflags)) + " is " + kind(c) + "; header values are strings"
		}
		return p.value(i)
	}
	start := i
	i, vflags, err := p.str(i)
	if err != nil || st.bad != "" {
		return i, err
	}
	name := headerName(key, kflags)
	switch _, dup := st.headers[name]; {
	case name == "":
		st.bad = `"headers" has an empty header name; header names are non-empty`
	case dup:
		st.bad = `"headers".` + quoteName(name) + " appears twice; give each header once"
	default:
		if st.headers == nil {
			st.headers = make(map[string]string, 4)
		}
		st.headers[name] = text(p.buf[start:i], vflags)
	}
	return i, nil
}

// finish returns the job's payload and headers, or its Err.
func (p *parser) finish(st *jobState, index int) ([]byte, map[string]string, error) {
	if st.bad == "" {
		switch st.seen & (fieldData | fieldBase64) {
		case 0:
			st.bad = `has neither "data" nor "data_base64"; give exactly one`
		case fieldData | fieldBase64:
			st.bad = `has both "data" and "data_base64"; give exactly one`
		}
	}
	if st.bad != "" {
		return nil, nil, p.jobErr(index, st.bad)
	}
	if st.seen&fieldData != 0 {
		return st.data, st.headers, nil
	}
	src := st.b64[1 : len(st.b64)-1]
	if st.b64Flags&hasEscape != 0 {
		src = []byte(text(st.b64, st.b64Flags))
	}
	data := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
	n, err := base64.StdEncoding.Decode(data, src)
	if err != nil {
		at := ""
		var c base64.CorruptInputError
		if errors.As(err, &c) {
			at = " at character " + strconv.FormatInt(int64(c), 10)
		}
		return nil, nil, p.jobErr(index, `"data_base64" is not valid base64`+at+
			"; want standard base64 (A-Z, a-z, 0-9, '+', '/', padded with '=' to a multiple of 4), not URL-safe or unpadded")
	}
	return data[:n:n], st.headers, nil
}

// jobErr is the Err of a bad job: the job's index (and line, in NDJSON),
// then msg.
func (p *parser) jobErr(index int, msg string) error {
	at := "job " + strconv.Itoa(index)
	if p.line {
		at += " (line " + strconv.Itoa(p.lineNo) + ")"
	}
	return errors.New(at + ": " + msg)
}

// at returns the byte at i, or 0 past the end.
func (s *scanner) at(i int) byte {
	if i < len(s.buf) {
		return s.buf[i]
	}
	return 0
}

// kind names the JSON type of the value that starts with c.
func kind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// headerName returns the header name in key (quoted), sharing the strings
// of the headers a job commonly takes.
func headerName(key []byte, flags int) string {
	if flags != 0 {
		return text(key, flags)
	}
	switch string(key[1 : len(key)-1]) {
	case "Shaper-Key":
		return "Shaper-Key"
	case "Nats-Msg-Id":
		return "Nats-Msg-Id"
	case "Shaper-Cost":
		return "Shaper-Cost"
	case "Shaper-Priority":
		return "Shaper-Priority"
	case "Shaper-Max-Wait":
		return "Shaper-Max-Wait"
	case "Shaper-Delay":
		return "Shaper-Delay"
	case "Shaper-Not-Before":
		return "Shaper-Not-Before"
	case "Shaper-Reply-To":
		return "Shaper-Reply-To"
	}
	return string(key[1 : len(key)-1])
}

// quoteName quotes s for an error, cut to maxName bytes.
func quoteName(s string) string {
	if len(s) <= maxName {
		return strconv.Quote(s)
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
