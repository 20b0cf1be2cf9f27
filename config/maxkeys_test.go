package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdmissionMaxKeys(t *testing.T) {
	yaml := `
downstreams:
  p:
    rate: 2/s
    queue: { capacity: 10, backend: memory }
    admission: { mode: token_bucket, rate: 1/s, burst: 5, max_keys: %s }
    sink: { http: { url: "http://127.0.0.1:1/" } }
`
	write := func(v string) string {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(strings.Replace(yaml, "%s", v, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name, value string
		env         []string
		want        int
		err         string
	}{
		{name: "file", value: "1000", want: 1000},
		{name: "env overrides file", value: "1000", env: []string{"SHAPER_DOWNSTREAMS_P_ADMISSION_MAX_KEYS=5"}, want: 5},
		{name: "zero is the default", value: "0", want: 0},
		{name: "negative", value: "-1", err: "downstreams.p.admission.max_keys: must be 1..1073741824, got -1 (env SHAPER_DOWNSTREAMS_P_ADMISSION_MAX_KEYS)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadWith(write(tc.value), Options{Environ: append([]string{}, tc.env...)})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			adm := cfg.ShaperSettings().Lanes[0].Admission
			if adm == nil || adm.MaxKeys != tc.want {
				t.Errorf("limiter config %+v, want MaxKeys %d", adm, tc.want)
			}
		})
	}
}
