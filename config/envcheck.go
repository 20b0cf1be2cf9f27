package config

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// envPrefix starts every env var that sets a key.
const envPrefix = "SHAPER_"

// envNotKeys are SHAPER_ variables that are not config keys, so Load
// leaves them alone: shaperctl's own (a container with admin.tls is given
// SHAPER_ADMIN_URL and SHAPER_ADMIN_CA for its health check, and shaperd
// sees them too) and the switches of the repository's own tests.
var envNotKeys = map[string]bool{
	"SHAPER_ADMIN_URL":      true,
	"SHAPER_ADMIN_USER":     true,
	"SHAPER_ADMIN_PASSWORD": true,
	"SHAPER_ADMIN_CA":       true,
	"SHAPER_IMAGE_TAR":      true,
	"SHAPER_SCREENSHOTS":    true,
}

// checkEnv reports every non-empty SHAPER_ variable in environ that sets no
// key: a misspelled key or downstream name would otherwise change nothing,
// silently. It runs after checkShape, which found the downstreams. A nil
// environ is the process environment.
func (l *loader) checkEnv(environ []string) {
	if environ == nil {
		environ = os.Environ()
	}
	l.checkLimitsEnv(environ)
	known := l.envKeys()
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if val == "" || !strings.HasPrefix(name, envPrefix) || envNotKeys[name] {
			continue
		}
		if _, ok := known[name]; ok || l.limitsEnv(name) {
			continue
		}
		if strings.HasPrefix(name, EnvName("downstreams")+"_") && l.probs.isBad("downstreams") {
			continue // the file's downstreams are reported; which exist is unknown
		}
		l.probs.addFileOnly(name, "%s", l.unknownEnv(name, known))
	}
}

// envKeys maps each env var that sets a key to that key: the top-level
// keys, and every key of each downstream in the file (its headers only
// those the file names, as env can set a header but not add one).
func (l *loader) envKeys() map[string]string {
	known := map[string]string{}
	for _, lf := range configLeaves {
		if lf.typ != downstreamsTyp {
			known[EnvName(lf.path)] = lf.path
		}
	}
	for _, name := range l.names {
		prefix := "downstreams." + name + "."
		for _, lf := range dsLeaves {
			switch lf.typ {
			case limitsType: // limitsEnv: no env var, reported by checkLimitsEnv
			case headersType:
				hs, _ := lookupPath(l.raw, name+"."+lf.path).(map[string]any)
				for h := range hs {
					known[EnvName(prefix+lf.path+"."+h)] = prefix + lf.path + "." + h
				}
			default:
				known[EnvName(prefix+lf.path)] = prefix + lf.path
			}
		}
	}
	return known
}

// limitsEnv reports whether name is one checkLimitsEnv reports.
func (l *loader) limitsEnv(name string) bool {
	for _, ds := range l.names {
		env := EnvName("downstreams." + ds + ".admission.limits")
		if name == env || strings.HasPrefix(name, env+"_") {
			return true
		}
	}
	return false
}

// unknownEnv says why the env var name sets no key and what would be valid.
func (l *loader) unknownEnv(name string, known map[string]string) string {
	dsEnv := EnvName("downstreams") + "_"
	if !strings.HasPrefix(name, dsEnv) {
		var top []string
		for env, key := range known {
			if !strings.HasPrefix(key, "downstreams.") {
				top = append(top, env)
			}
		}
		return "matches no config key" + suggest(name, top, known, "; top-level keys: "+strings.Join(keysOf(configType), ", ")+
			" (a section's keys follow its name: SHAPER_NATS_URL)")
	}
	ds := ""
	for _, n := range l.names { // the longest name wins: a and a_b
		if strings.HasPrefix(name, EnvName("downstreams."+n)+"_") && len(n) > len(ds) {
			ds = n
		}
	}
	if ds == "" {
		configured := "none"
		if len(l.names) > 0 {
			configured = strings.Join(l.names, ", ")
		}
		return "names no downstream in the config file (configured: " + configured +
			"); env cannot add a downstream" + suggest(name, slices.Collect(maps.Keys(known)), known, "")
	}
	var own []string
	for env, key := range known {
		if strings.HasPrefix(key, "downstreams."+ds+".") {
			own = append(own, env)
		}
	}
	hdrs := EnvName("downstreams."+ds+".sink.http.headers") + "_"
	if strings.HasPrefix(name, hdrs) {
		return "sets a header the file does not name under downstreams." + ds +
			".sink.http.headers; env can override a header there, not add one: write it in the config file"
	}
	return "matches no key of downstreams." + ds + suggest(name, own, known, "; keys here: "+strings.Join(keysOf(downstreamType), ", ")+
		" (a section's keys follow its name: "+EnvName("downstreams."+ds+".queue.capacity")+")")
}

// suggest returns "; did you mean ENV (key)?" for the candidate closest to
// name, if one is close enough to be a typo; otherwise fallback.
func suggest(name string, candidates []string, keys map[string]string, fallback string) string {
	slices.Sort(candidates) // ties go the same way every time
	best, bestD := "", 4    // at most 3 edits away
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return fallback
	}
	return "; did you mean " + best + " (" + keys[best] + ")?"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
