package bulk

import (
	"bytes"
	"errors"
	"strconv"
)

// Job is one job object of a bulk body, in the request's order.
type Job struct {
	// Index is the job's 0-based place in the request.
	Index int
	// Data is the payload: the "data" value's bytes exactly as written (a
	// sub-slice of the body, capacity cut to its length), or "data_base64"
	// decoded (never nil, empty for "").
	Data []byte
	// Headers are the job's "headers"; nil when absent, null or {}.
	Headers map[string]string
	// Err, when not nil, makes the job a bad one: its sentence names the
	// job, the field and what would be valid. Data and Headers are then nil.
	Err error
}

// maxPrealloc bounds the jobs Parse makes room for before it reads them.
const maxPrealloc = 1024

// parser reads a bulk body; buf is the body, or in NDJSON the body up to
// the end of the current line.
type parser struct {
	scanner
	lineNo int // the current line, 1-based (NDJSON)
}

// Parse reads body: a JSON array of job objects, or NDJSON (one object per
// line; blank lines skipped), told apart by the first non-space byte '['.
// An error means the body cannot be read at all: it names the line (NDJSON,
// 1-based) or index (array, 0-based) and byte offset where reading failed,
// and what would be valid. No jobs at all, or more than maxJobs, is such an
// error (naming maxJobs); reading stops at job maxJobs+1. A maxJobs below 1
// is an error too. A job that can be read but is not valid has its Err set.
func Parse(body []byte, maxJobs int) ([]Job, error) {
	if maxJobs < 1 {
		return nil, errors.New("bulk: maxJobs is " + strconv.Itoa(maxJobs) + "; it must be at least 1")
	}
	p := parser{scanner: scanner{buf: body}}
	i := p.ws(0)
	if i == len(body) {
		return nil, errors.New("bulk: the body is empty; want a JSON array of job objects, or NDJSON: one job object per line")
	}
	if body[i] == '[' {
		return p.array(i, maxJobs)
	}
	p.line = true
	return p.ndjson(body, maxJobs)
}

// array reads the JSON array whose '[' is at i.
func (p *parser) array(i, maxJobs int) ([]Job, error) {
	n := min(bytes.Count(p.buf, []byte{'{'}), maxJobs, maxPrealloc)
	jobs := make([]Job, 0, n)
	i = p.ws(i + 1)
	if p.at(i) == ']' {
		return nil, errors.New("bulk: the array has no jobs; want at least one job object, such as [{\"data\": …}]")
	}
	for index := 0; ; index++ {
		if index == maxJobs && p.at(i) != ']' {
			return nil, p.tooMany("index "+strconv.Itoa(index), i, maxJobs)
		}
		var job Job
		var err error
		if i, job, err = p.arrayJob(i, index); err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
		i = p.ws(i)
		switch p.at(i) {
		case ',':
			i = p.ws(i + 1)
		case ']':
			if i = p.ws(i + 1); i < len(p.buf) {
				return nil, bodyErr("after the array", p.fail(i, "only whitespace after the array's closing ']'"))
			}
			return jobs, nil
		default:
			return nil, bodyErr("index "+strconv.Itoa(index), p.fail(i, "',' or ']' after a job"))
		}
	}
}

// arrayJob reads the job at i, at index in the array.
func (p *parser) arrayJob(i, index int) (int, Job, error) {
	if i >= len(p.buf) {
		return i, Job{}, bodyErr("index "+strconv.Itoa(index), p.fail(i, "a job object"))
	}
	i, job, err := p.job(i, index)
	if err != nil {
		return i, job, bodyErr("index "+strconv.Itoa(index), err)
	}
	return i, job, nil
}

// ndjson reads body as one job object per line.
func (p *parser) ndjson(body []byte, maxJobs int) ([]Job, error) {
	n := min(bytes.Count(body, []byte{'\n'})+1, maxJobs, maxPrealloc)
	jobs := make([]Job, 0, n)
	for start := 0; start < len(body); {
		p.lineNo++
		end := bytes.IndexByte(body[start:], '\n')
		if end < 0 {
			end = len(body)
		} else {
			end += start
		}
		p.buf = body[:end]
		i := p.ws(start)
		start = end + 1
		if i == end {
			continue // a blank line
		}
		if len(jobs) == maxJobs {
			return nil, p.tooMany(p.where(), i, maxJobs)
		}
		i, job, err := p.job(i, len(jobs))
		if err == nil && p.ws(i) < end {
			err = p.fail(p.ws(i), "the end of the line after the job object (one job per line)")
		}
		if err != nil {
			return nil, p.lineErr(err, len(jobs) == 0)
		}
		jobs = append(jobs, job)
	}
	if len(jobs) == 0 {
		return nil, errors.New("bulk: the body has no jobs; want at least one job object")
	}
	return jobs, nil
}

// lineErr is the error for a line that cannot be read; on the first job's
// line it says why the body is read as NDJSON.
func (p *parser) lineErr(err error, first bool) error {
	err = bodyErr(p.where(), err)
	if first {
		err = errors.New(err.Error() + "; a body that does not start with '[' is NDJSON, one job object per line")
	}
	return err
}

// where names the current line.
func (p *parser) where() string { return "line " + strconv.Itoa(p.lineNo) }

// tooMany is the error for a job past maxJobs, found at i.
func (p *parser) tooMany(where string, i, maxJobs int) error {
	return bodyErr(where, &syntaxError{off: i, msg: "more than max_jobs (" + strconv.Itoa(maxJobs) +
		") jobs; send at most " + strconv.Itoa(maxJobs) + " jobs per request"})
}

// bodyErr is the error for a body that cannot be read: where (a line or an
// index), the byte offset, and what was wrong.
func bodyErr(where string, err error) error {
	var se *syntaxError
	if !errors.As(err, &se) {
		return errors.New("bulk: " + where + ": " + err.Error())
	}
	return errors.New("bulk: " + where + ", byte " + strconv.Itoa(se.off) + ": " + se.msg)
}
