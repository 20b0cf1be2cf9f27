package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones of maintenance windows, on hosts without a zoneinfo database

	"github.com/shaperd/shaper/shaper/policy"
)

// Maintenance is a downstream's recurring maintenance windows
// (downstreams.NAME.maintenance): no starts inside one, intake goes on. In
// the file it is a list, one window a line; in env (and as one value) the
// windows are separated by ';'. A window is
//
//	DAYS START DURATION [TIME_ZONE]
//
// DAYS is daily or a comma-separated list of mon..sun and ranges of them
// (sat,sun; mon-fri); START is HH:MM or HH:MM:SS, when the window begins on
// each of its days; DURATION is a duration up to 168h (a window that
// crosses midnight belongs to the day it begins on); TIME_ZONE is an IANA
// name such as Europe/Berlin, or UTC (the default). Example:
//
//	maintenance:
//	  - sat,sun 02:00 2h Europe/Berlin
//	  - mon-fri 23:30 30m UTC
type Maintenance string

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// maintenanceFormat is what the messages say a window looks like.
const maintenanceFormat = "write DAYS START DURATION [TIME_ZONE], e.g. \"sat,sun 02:00 2h Europe/Berlin\" (DAYS: daily, mon..sun, ranges like mon-fri)"

// Parse returns the windows; empty means none.
func (m Maintenance) Parse() ([]policy.Window, error) {
	var out []policy.Window
	for _, item := range strings.Split(string(m), ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		w, err := parseWindow(item)
		if err != nil {
			return nil, fmt.Errorf("window %q: %w", item, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func parseWindow(s string) (policy.Window, error) {
	var w policy.Window
	f := strings.Fields(s)
	if len(f) < 3 || len(f) > 4 {
		return w, fmt.Errorf("has %d fields; %s", len(f), maintenanceFormat)
	}
	days, err := parseDays(f[0])
	if err != nil {
		return w, err
	}
	w.Days = days
	if w.Hour, w.Minute, w.Second, err = parseClock(f[1]); err != nil {
		return w, err
	}
	if w.Length, err = parseDuration(f[2]); err != nil || w.Length <= 0 || w.Length > policy.MaxWindowLength {
		return w, fmt.Errorf("duration %q must be 1s..168h, e.g. 2h or 30m", f[2])
	}
	w.Loc = time.UTC
	if len(f) == 4 {
		if w.Loc, err = time.LoadLocation(f[3]); err != nil || f[3] == "" || strings.EqualFold(f[3], "local") {
			return w, fmt.Errorf("time zone %q is not an IANA time zone; write e.g. Europe/Berlin or UTC", f[3])
		}
	}
	return w, nil
}

func parseDays(s string) ([7]bool, error) {
	var days [7]bool
	if strings.EqualFold(s, "daily") {
		for i := range days {
			days[i] = true
		}
		return days, nil
	}
	for _, part := range strings.Split(strings.ToLower(s), ",") {
		from, to, isRange := strings.Cut(part, "-")
		a, ok1 := dayNames[from]
		b, ok2 := dayNames[to]
		if !isRange {
			b, ok2 = a, ok1
		}
		if !ok1 || !ok2 {
			return days, fmt.Errorf("days %q: %q is not a day; use daily, or mon, tue, wed, thu, fri, sat, sun and ranges like mon-fri", s, part)
		}
		for d := a; ; d = (d + 1) % 7 {
			days[d] = true
			if d == b {
				break
			}
		}
	}
	return days, nil
}

func parseClock(s string) (h, m, sec int, err error) {
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("start %q is not a time of day; write HH:MM or HH:MM:SS, e.g. 02:00", s)
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, 0, bad
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || len(p) != 2 || v < 0 || v > [3]int{23, 59, 59}[i] {
			return 0, 0, 0, bad
		}
		n[i] = v
	}
	return n[0], n[1], n[2], nil
}

// maintenanceValue decodes the file's list of windows, or one value with
// windows separated by ';' (env), into a Maintenance.
func maintenanceValue(data any) (any, error) {
	list, ok := data.([]any)
	if !ok {
		s, err := scalar(data, "a list of windows like \"sat,sun 02:00 2h Europe/Berlin\"")
		return Maintenance(s), err
	}
	items := make([]string, len(list))
	for i, it := range list {
		s, ok := it.(string)
		if !ok {
			return nil, &hookError{fmt.Sprintf("item %d is %s, not a window; %s", i, describe("", it), maintenanceFormat)}
		}
		items[i] = s
	}
	return Maintenance(strings.Join(items, "; ")), nil
}

// maintenance converts d's windows for the shaper (validated).
func (d Downstream) maintenance() []policy.Window {
	ws, _ := d.Maintenance.Parse()
	return ws
}
