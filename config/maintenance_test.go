package config

import (
	"testing"
	"time"
)

// TestMaintenanceLoad: the file's list of windows, and env's one value
// with windows separated by ';', become the shaper's windows; a bad window
// is named with its key and env var.
func TestMaintenanceLoad(t *testing.T) {
	t.Parallel()
	cfg, err := LoadWith("testdata/maintenance.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ws := cfg.ShaperSettings().Lanes[0].Maintenance
	if len(ws) != 2 {
		t.Fatalf("windows = %+v", ws)
	}
	w0, w1 := ws[0], ws[1]
	if w0.Loc.String() != "Europe/Berlin" || w0.Hour != 2 || w0.Length != 2*time.Hour ||
		w0.Days != [7]bool{time.Saturday: true, time.Sunday: true} {
		t.Errorf("first window = %+v", w0)
	}
	if w1.Loc != time.UTC || w1.Hour != 23 || w1.Minute != 30 || w1.Second != 15 ||
		w1.Days != [7]bool{time.Friday: true, time.Saturday: true, time.Sunday: true, time.Monday: true} {
		t.Errorf("second window = %+v", w1)
	}
	cfg, err = LoadWith("testdata/maintenance.yaml", Options{Environ: []string{
		"SHAPER_DOWNSTREAMS_PRINTER_MAINTENANCE=daily 03:00 15m; mon 04:00 1h UTC"}})
	if err != nil {
		t.Fatal(err)
	}
	if ws := cfg.ShaperSettings().Lanes[0].Maintenance; len(ws) != 2 || ws[0].Days != [7]bool{true, true, true, true, true, true, true} {
		t.Errorf("windows from env = %+v", ws)
	}
	_, err = LoadWith("testdata/maintenance_bad.yaml", noEnv)
	want := `downstreams.printer.maintenance: window "weekdays 25:00 2h Mars/Olympus": days "weekdays": "weekdays" is not a day; use daily, or mon, tue, wed, thu, fri, sat, sun and ranges like mon-fri (env SHAPER_DOWNSTREAMS_PRINTER_MAINTENANCE)
downstreams.scanner.maintenance: window "mon-fri 23:30 200h": duration "200h" must be 1s..168h, e.g. 2h or 30m (env SHAPER_DOWNSTREAMS_SCANNER_MAINTENANCE)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	for _, tc := range []struct{ in, want string }{
		{"sat 2:00 1h", `window "sat 2:00 1h": start "2:00" is not a time of day; write HH:MM or HH:MM:SS, e.g. 02:00`},
		{"sat 02:00 1h Mars/Olympus", `window "sat 02:00 1h Mars/Olympus": time zone "Mars/Olympus" is not an IANA time zone; write e.g. Europe/Berlin or UTC`},
		{"sat 02:00", `window "sat 02:00": has 2 fields; write DAYS START DURATION [TIME_ZONE], e.g. "sat,sun 02:00 2h Europe/Berlin" (DAYS: daily, mon..sun, ranges like mon-fri)`},
	} {
		if _, err := Maintenance(tc.in).Parse(); err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) = %v, want %s", tc.in, err, tc.want)
		}
	}
}
