package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// KeyWeights are the per-key round-robin weights of queue.fairness key,
// written as one value, key=weight pairs separated by commas:
// "gold=3,silver=2" (keys are admission keys, matched exactly; a key that
// is not listed weighs 1). One value rather than a mapping keeps the keys'
// case (config keys are case-insensitive) and fits in one env var.
type KeyWeights string

// MaxWeight bounds one key's weight.
const MaxWeight = 1000

// Parse returns the weights by key; empty means none.
func (w KeyWeights) Parse() (map[string]int, error) {
	s := strings.TrimSpace(string(w))
	if s == "" {
		return nil, nil
	}
	out := map[string]int{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || k == "" || strings.ContainsFunc(k, unicode.IsSpace) {
			return nil, fmt.Errorf("%q is not key=weight; write e.g. gold=3,silver=2", strings.TrimSpace(pair))
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxWeight {
			return nil, fmt.Errorf("weight of key %q must be a whole number 1..%d, got %q", k, MaxWeight, strings.TrimSpace(v))
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("key %q is given twice", k)
		}
		out[k] = n
	}
	return out, nil
}
