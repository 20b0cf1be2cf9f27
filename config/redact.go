package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// redacted replaces a secret in Redacted and String.
const redacted = "REDACTED"

// Redacted returns a deep copy of c that is safe to log: nats.password,
// nats.token, admin.basic_auth.password_hash, every HTTP sink header value
// and the credentials in URLs are replaced by REDACTED. Empty secrets stay empty, so it still shows which
// are set.
func (c Config) Redacted() Config {
	r := c
	r.NATS = c.NATS.redacted()
	if r.Admin.BasicAuth.PasswordHash != "" {
		r.Admin.BasicAuth.PasswordHash = redacted
	}
	if c.Downstreams != nil {
		r.Downstreams = make(map[string]Downstream, len(c.Downstreams))
	}
	for name, d := range c.Downstreams {
		if d.Admission != nil {
			a := *d.Admission
			a.Limits = slices.Clone(a.Limits)
			d.Admission = &a
		}
		if d.Sink.HTTP != nil {
			h := *d.Sink.HTTP
			h.URL = redactURLText(h.URL)
			h.Headers = maps.Clone(h.Headers)
			for k := range h.Headers {
				h.Headers[k] = redacted
			}
			d.Sink.HTTP = &h
		}
		if d.Sink.NATS != nil {
			n := *d.Sink.NATS
			d.Sink.NATS = &n
		}
		r.Downstreams[name] = d
	}
	return r
}

func (n NATS) redacted() NATS {
	if n.Password != "" {
		n.Password = redacted
	}
	if n.Token != "" {
		n.Token = redacted
	}
	n.URL = redactURLText(n.URL)
	return n
}

// String formats n with its secrets masked, so %v of a Config or NATS
// never prints them.
func (n NATS) String() string {
	var b strings.Builder
	writeKeys(&b, "", reflect.ValueOf(n.redacted()), leavesOf(reflect.TypeFor[NATS]()))
	return strings.TrimSuffix(b.String(), "\n")
}

// String formats the redacted config as one `key: value` line per set
// key, in file order with downstreams sorted by name; for logs and
// `shaperd -check-config`.
func (c Config) String() string {
	r := c.Redacted()
	var b strings.Builder
	writeKeys(&b, "", reflect.ValueOf(r), configLeaves)
	for _, name := range slices.Sorted(maps.Keys(r.Downstreams)) {
		writeKeys(&b, "downstreams."+name+".", reflect.ValueOf(r.Downstreams[name]), dsLeaves)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func writeKeys(b *strings.Builder, prefix string, root reflect.Value, leaves []leaf) {
	for _, lf := range leaves {
		v, ok := lookup(root, lf.index)
		if !ok || lf.typ == downstreamsTyp || v.IsZero() {
			continue
		}
		if lf.typ == limitsType {
			writeLimits(b, prefix+lf.path, v)
			continue
		}
		if lf.typ == headersType {
			for _, k := range slices.Sorted(maps.Keys(v.Interface().(map[string]string))) {
				fmt.Fprintf(b, "%s%s.%s: %s\n", prefix, lf.path, k, redacted)
			}
			continue
		}
		val := v.Interface()
		if d, ok := val.(time.Duration); ok {
			val = FormatDuration(d)
		}
		fmt.Fprintf(b, "%s%s: %v\n", prefix, lf.path, val)
	}
}

// redactURLText masks the user parts of a URL or comma-separated URL list.
func redactURLText(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if m, ok := maskURL(p); ok {
			parts[i] = m
		} else {
			parts[i] = redacted
		}
	}
	return strings.Join(parts, ",")
}
