package config

import (
	"reflect"
	"strings"
)

// The key tree is derived from the mapstructure tags of Config, so the
// loader, the strict key check, the env names and String can never disagree
// with the struct about which keys exist.

// EnvName returns the environment variable that overrides key (a dotted
// key path such as "downstreams.legacy-erp.rate"): SHAPER_ and the path
// upper-cased with '.' and '-' as '_' (SHAPER_DOWNSTREAMS_LEGACY_ERP_RATE).
func EnvName(key string) string {
	return "SHAPER_" + strings.ToUpper(envReplacer.Replace(key))
}

// envReplacer maps key paths to env names; viper gets the same one.
var envReplacer = strings.NewReplacer(".", "_", "-", "_")

// leaf is one key that holds a value (a scalar, or a map such as headers).
type leaf struct {
	path  string       // dotted, relative to the struct it was listed from
	typ   reflect.Type // the field's type
	index []int        // field indexes from that struct, through pointers
	opt   string       // nearest enclosing optional (pointer) section; "" = none
}

// leavesOf lists the keys of struct type t in field order, descending into
// structs and pointers to structs. Downstreams and headers are map leaves.
func leavesOf(t reflect.Type) []leaf {
	var out []leaf
	var walk func(t reflect.Type, prefix, opt string, index []int)
	walk = func(t reflect.Type, prefix, opt string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			path := prefix + f.Tag.Get("mapstructure")
			idx := append(append([]int(nil), index...), i)
			ft, fopt := f.Type, opt
			if ft.Kind() == reflect.Pointer {
				ft, fopt = ft.Elem(), path
			}
			if ft.Kind() == reflect.Struct {
				walk(ft, path+".", fopt, idx)
				continue
			}
			out = append(out, leaf{path: path, typ: f.Type, index: idx, opt: opt})
		}
	}
	walk(t, "", "", nil)
	return out
}

var (
	configType     = reflect.TypeFor[Config]()
	downstreamType = reflect.TypeFor[Downstream]()
	headersType    = reflect.TypeFor[map[string]string]()
	downstreamsTyp = reflect.TypeFor[map[string]Downstream]()
	configLeaves   = leavesOf(configType)
	dsLeaves       = leavesOf(downstreamType)
)

// keysOf returns the keys of struct type t (or *struct) in field order.
func keysOf(t reflect.Type) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("mapstructure")
	}
	return keys
}

// fieldByKey finds the field of struct type t (or *struct) tagged key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.Tag.Get("mapstructure") == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// settable returns the field at index below root (an addressable struct),
// allocating nil pointers on the way.
func settable(root reflect.Value, index []int) reflect.Value {
	v := root
	for _, i := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v
}

// lookup returns the field at index below root; ok is false when a nil
// pointer (an absent optional section) is on the way.
func lookup(root reflect.Value, index []int) (v reflect.Value, ok bool) {
	v = root
	for _, i := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

// isSecret reports whether the value of key must never be printed.
func isSecret(key string) bool {
	return key == "nats.password" || key == "nats.token" || key == "admin.basic_auth.password_hash" ||
		strings.Contains(key, ".sink.http.headers.")
}

// defaultAt is lf's value in root, a template of defaults; the zero value
// of its type under a section root leaves nil.
func defaultAt(root reflect.Value, lf leaf) any {
	if v, ok := lookup(root, lf.index); ok {
		return v.Interface()
	}
	return reflect.Zero(lf.typ).Interface()
}
