package config

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/viper"
)

// Options changes where Load reads the environment from. The zero value
// reads the process environment (through viper's AutomaticEnv).
type Options struct {
	// Environ, if not nil, replaces the process environment: "KEY=value"
	// entries as os.Environ returns them. Tests use it to run in parallel.
	Environ []string
}

// Load reads the YAML file at path and the SHAPER_* environment, applies
// defaults and returns the validated Config. An empty path means no file:
// Defaults, adjusted by env, with no downstreams.
//
// Every key that holds a value can be set by env, including the keys of
// each downstream named in the file (SHAPER_DOWNSTREAMS_PRINTER_RATE=5/s);
// env cannot create a downstream. Env wins over the file. An env var that
// sets a key of sink.http, sink.nats or admission makes that section
// present, as if the file had it. Empty env vars are ignored; any other
// SHAPER_ var that sets no key is a problem (but shaperctl's own).
//
// On failure Load returns a zero Config and either a file error
// (`config file "x.yaml": no such file`, or invalid YAML with the parser's
// line) or errors.Join of every *Problem at once: unknown keys and env
// vars, values that do not parse, values out of range, files that cannot
// be read. Load is safe for concurrent use.
func Load(path string) (Config, error) {
	return LoadWith(path, Options{})
}

// LoadWith is Load with Options.
func LoadWith(path string, opts Options) (Config, error) {
	v := viper.New() // never the global instance: reload and tests need fresh state
	v.SetConfigType("yaml")
	v.SetEnvPrefix("SHAPER")
	v.SetEnvKeyReplacer(envReplacer)
	l := &loader{v: v, env: os.LookupEnv, present: map[string]bool{}}
	if opts.Environ != nil {
		l.env = environLookup(opts.Environ)
	}
	if path != "" {
		if err := l.readFile(path); err != nil {
			return Config{}, err
		}
	}
	l.checkShape()
	l.checkEnv(opts.Environ)
	keys := l.keys()
	for _, k := range keys {
		if def, ok := l.defaults[k]; ok {
			v.SetDefault(k, def) // AutomaticEnv only sees keys viper knows
		}
	}
	if opts.Environ == nil {
		v.AutomaticEnv()
	} else {
		for _, k := range keys {
			if val, ok := l.envValue(k); ok {
				v.Set(k, val)
			}
		}
	}
	cfg := l.decode().withDeadLetterSubjects()
	cfg.validate(&l.probs)
	if err := l.probs.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// loader holds the state of one Load.
type loader struct {
	v        *viper.Viper
	env      func(string) (string, bool)
	probs    problems
	names    []string            // downstream names from the file, sorted, valid
	raw      map[string]any      // each downstream's raw file mapping
	present  map[string]bool     // optional sections configured (file or env), by full key
	defaults map[string]any      // default per full key, filled by keys
	headers  map[string][]string // header names per downstream, from the file
}

func environLookup(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok {
			m[k] = val
		}
	}
	return func(k string) (string, bool) { val, ok := m[k]; return val, ok }
}

// envValue returns the env override of key; empty values do not count,
// as in viper.
func (l *loader) envValue(key string) (string, bool) {
	val, ok := l.env(EnvName(key))
	return val, ok && val != ""
}

// fileError is a problem with the config file as a whole.
type fileError struct {
	path, msg string
	err       error
}

func (e *fileError) Error() string { return "config file " + quote(e.path) + ": " + e.msg }
func (e *fileError) Unwrap() error { return e.err }

func (l *loader) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &fileError{path, "no such file", err}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &fileError{path, pe.Err.Error(), err}
		}
		return &fileError{path, err.Error(), err}
	}
	if err := l.v.ReadConfig(bytes.NewReader(data)); err != nil {
		msg := err.Error()
		var pe viper.ConfigParseError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			msg = pe.Unwrap().Error()
		}
		msg = strings.Join(strings.Fields(strings.TrimPrefix(msg, "yaml: ")), " ")
		return &fileError{path, "invalid YAML: " + msg, err}
	}
	return nil
}

// checkShape walks the file's keys against Config: unknown keys, sections
// that are not mappings and bad downstream names are reported; the valid
// downstream names are kept.
func (l *loader) checkShape() {
	seen := map[string]bool{}
	for _, k := range l.v.AllKeys() { // before defaults and env: the file's keys only
		top, _, _ := strings.Cut(k, ".")
		if seen[top] {
			continue
		}
		seen[top] = true
		f, ok := fieldByKey(configType, top)
		if !ok {
			l.unknown(top, configType)
			continue
		}
		l.check(top, l.v.Get(top), f.Type)
	}
	slices.Sort(l.names)
}

func (l *loader) unknown(key string, parent reflect.Type) {
	l.probs.addFileOnly(key, "unknown key; valid keys here: %s", strings.Join(keysOf(parent), ", "))
	l.probs.markBad(key)
}

func (l *loader) check(path string, raw any, t reflect.Type) {
	if raw == nil {
		return
	}
	if t == limitsType {
		l.checkLimits(path, raw)
		return
	}
	m, isMap := raw.(map[string]any)
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	switch {
	case st.Kind() != reflect.Struct && st.Kind() != reflect.Map:
		return // scalars are checked when decoded
	case !isMap && st.Kind() == reflect.Struct:
		l.probs.addFileOnly(path, "expected a mapping with keys %s, got %s", strings.Join(keysOf(st), ", "), describe(path, raw))
		l.probs.markBad(path)
		return
	case !isMap:
		l.probs.addFileOnly(path, "expected a mapping, got %s", describe(path, raw))
		l.probs.markBad(path)
		return
	}
	keys := slices.Sorted(maps.Keys(m))
	switch t {
	case downstreamsTyp:
		l.raw = m
		for _, name := range keys {
			key := path + "." + name
			if !validName(name) {
				l.probs.addFileOnly(key, "%q is not a downstream name; use letters, digits, - and _", name)
				l.probs.markBad(key)
				continue
			}
			l.names = append(l.names, name)
			l.check(key, m[name], downstreamType)
		}
	case headersType:
		for _, name := range keys {
			if !validHeaderName(name) { // also keeps '.' out of viper key paths
				l.probs.addFileOnly(path+"."+name, "%q is not a header name; use letters, digits and -", name)
				l.probs.markBad(path + "." + name)
			} else if _, ok := m[name].(map[string]any); ok || isList(m[name]) {
				l.probs.addFileOnly(path+"."+name, "expected a header value, got %s", describe(path+"."+name, m[name]))
				l.probs.markBad(path + "." + name)
			}
		}
	default:
		for _, k := range keys {
			if f, ok := fieldByKey(st, k); ok {
				l.check(path+"."+k, m[k], f.Type)
			} else {
				l.unknown(path+"."+k, st)
			}
		}
	}
}

// keys lists every key that can hold a value, as full paths, filling
// l.defaults, l.present and l.headers on the way. A downstream's optional
// section is present when the file has it or env sets one of its keys.
func (l *loader) keys() []string {
	l.defaults = map[string]any{}
	var keys []string
	def := reflect.ValueOf(Defaults())
	for _, lf := range configLeaves {
		if lf.typ == downstreamsTyp {
			continue
		}
		keys = append(keys, lf.path)
		fv, _ := lookup(def, lf.index)
		l.defaults[lf.path] = fv.Interface()
	}
	tmpl := reflect.ValueOf(downstreamTemplate())
	l.headers = map[string][]string{}
	for _, name := range l.names {
		prefix := "downstreams." + name + "."
		raw, _ := l.raw[name].(map[string]any)
		for _, lf := range dsLeaves {
			if lf.typ == limitsType { // not in viper: no env var (checkLimitsEnv)
				continue
			}
			if lf.opt != "" && (hasPath(raw, lf.opt) || l.hasEnv(prefix+lf.path)) {
				l.present[prefix+lf.opt] = true
			}
		}
		for _, lf := range dsLeaves {
			if lf.opt != "" && !l.present[prefix+lf.opt] || lf.typ == limitsType {
				continue
			}
			if lf.typ == headersType {
				hs, _ := lookupPath(raw, lf.path).(map[string]any)
				for _, h := range slices.Sorted(maps.Keys(hs)) {
					l.headers[name] = append(l.headers[name], h)
					keys = append(keys, prefix+lf.path+"."+h)
				}
				continue
			}
			keys = append(keys, prefix+lf.path)
			l.defaults[prefix+lf.path] = defaultAt(tmpl, lf)
		}
	}
	return keys
}

func (l *loader) hasEnv(key string) bool {
	_, ok := l.envValue(key)
	return ok
}

// decode builds the Config key by key, so that every key that does not
// parse is reported, each with its own path and env var.
func (l *loader) decode() Config {
	var cfg Config
	root := reflect.ValueOf(&cfg).Elem()
	for _, lf := range configLeaves {
		if lf.typ != downstreamsTyp {
			l.decodeKey(lf.path, settable(root, lf.index))
		}
	}
	if len(l.names) > 0 {
		cfg.Downstreams = make(map[string]Downstream, len(l.names))
	}
	for _, name := range l.names {
		var d Downstream
		dv := reflect.ValueOf(&d).Elem()
		prefix := "downstreams." + name + "."
		for _, lf := range dsLeaves {
			if lf.opt != "" && !l.present[prefix+lf.opt] {
				continue
			}
			if lf.typ == limitsType {
				raw, _ := l.raw[name].(map[string]any)
				l.decodeLimits(prefix, lf.path, raw, settable(dv, lf.index))
				continue
			}
			if lf.typ != headersType {
				l.decodeKey(prefix+lf.path, settable(dv, lf.index))
				continue
			}
			for _, h := range l.headers[name] {
				var s string
				if l.decodeKey(prefix+lf.path+"."+h, reflect.ValueOf(&s).Elem()) {
					if d.Sink.HTTP.Headers == nil {
						d.Sink.HTTP.Headers = map[string]string{}
					}
					d.Sink.HTTP.Headers[h] = s
				}
			}
		}
		cfg.Downstreams[name] = d
	}
	return cfg
}

// decodeKey decodes the value of key into field through the decode hook and
// reports whether it did; a failure is recorded as a problem.
func (l *loader) decodeKey(key string, field reflect.Value) bool {
	if l.probs.isBad(key) {
		return false
	}
	raw := l.v.Get(key)
	if raw == nil {
		return false
	}
	return l.unmarshal(key, l.v, key, raw, field)
}

// unmarshal decodes vkey of v (whose value is raw) into field through the
// decode hook and reports whether it did; a failure is recorded as a
// problem with key.
func (l *loader) unmarshal(key string, v *viper.Viper, vkey string, raw any, field reflect.Value) bool {
	err := v.UnmarshalKey(vkey, field.Addr().Interface(), viper.DecodeHook(decodeHook))
	if err == nil {
		return true
	}
	var he *hookError
	if errors.As(err, &he) {
		l.probs.add(key, "%s", he.msg)
	} else {
		l.probs.add(key, "expected %s, got %s", kindName(field.Type()), describe(key, raw))
	}
	l.probs.markBad(key)
	return false
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// lookupPath follows a dotted path through nested mappings; nil if absent.
func lookupPath(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// hasPath reports whether the dotted path exists in m, even with a null value.
func hasPath(m map[string]any, path string) bool {
	last := path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		pm, ok := lookupPath(m, path[:i]).(map[string]any)
		if !ok {
			return false
		}
		m, last = pm, path[i+1:]
	}
	_, ok := m[last]
	return ok
}
