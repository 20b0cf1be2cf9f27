package config

import (
	"slices"
	"testing"
	"time"

	"github.com/shaperd/shaper/shaper/settings"
)

// The outcome keys load from the file with their defaults where absent,
// and reach the shaper's settings.
func TestOutcomesLoad(t *testing.T) {
	t.Parallel()
	c, err := LoadWith("testdata/outcomes.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Ingress.StatusPrefix, "acme.status")
	eq(t, c.Ingress.EventsPrefix, "acme.events")
	eq(t, c.Downstreams["pay"].Outcomes, Outcomes{Keep: 48 * time.Hour, ResultBytes: 4 << 10, Events: true, MaxRecords: 100000})
	eq(t, c.Downstreams["mail"].Outcomes, Outcomes{Keep: 24 * time.Hour, ResultBytes: 64 << 10, MaxRecords: 100000})
	lanes := c.ShaperSettings().Lanes
	i := slices.IndexFunc(lanes, func(l settings.Lane) bool { return l.Name == "pay" })
	eq(t, lanes[i].Outcomes, settings.Outcomes{Keep: 48 * time.Hour, ResultBytes: 4 << 10, Events: true, MaxRecords: 100000})

	d := Defaults()
	eq(t, d.Ingress.StatusPrefix, "shaper.status")
	eq(t, d.Ingress.EventsPrefix, "shaper.events")
	eq(t, DefaultDownstream().Outcomes, Outcomes{Keep: 24 * time.Hour, ResultBytes: 64 << 10, Events: false, MaxRecords: 100000})
}

// Every outcome key can be set by env, over the file or the default.
func TestOutcomesEnv(t *testing.T) {
	t.Parallel()
	c, err := LoadWith("testdata/outcomes.yaml", Options{Environ: []string{
		"SHAPER_DOWNSTREAMS_PAY_OUTCOMES_KEEP=1h",
		"SHAPER_DOWNSTREAMS_PAY_OUTCOMES_RESULT_BYTES=0",
		"SHAPER_DOWNSTREAMS_PAY_OUTCOMES_EVENTS=false",
		"SHAPER_DOWNSTREAMS_MAIL_OUTCOMES_MAX_RECORDS=500",
		"SHAPER_DOWNSTREAMS_MAIL_OUTCOMES_EVENTS=true",
		"SHAPER_INGRESS_STATUS_PREFIX=ops.status",
		"SHAPER_INGRESS_EVENTS_PREFIX=ops.events",
	}})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Downstreams["pay"].Outcomes, Outcomes{Keep: time.Hour, MaxRecords: 100000})
	eq(t, c.Downstreams["mail"].Outcomes, Outcomes{Keep: 24 * time.Hour, ResultBytes: 64 << 10, Events: true, MaxRecords: 500})
	eq(t, c.Ingress.StatusPrefix, "ops.status")
	eq(t, c.Ingress.EventsPrefix, "ops.events")

	_, err = LoadWith("testdata/outcomes.yaml", Options{Environ: []string{"SHAPER_DOWNSTREAMS_PAY_OUTCOMES_KEEP=100d"}})
	want := `downstreams.pay.outcomes.keep: "100d" is not a duration; write e.g. 10s, 1m30s or 2h (env SHAPER_DOWNSTREAMS_PAY_OUTCOMES_KEEP)`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}

// Each bad outcomes value is one line naming the key and what is valid;
// an unknown key under outcomes is refused.
func TestOutcomesInvalid(t *testing.T) {
	t.Parallel()
	_, err := LoadWith("testdata/outcomes_bad.yaml", noEnv)
	want := `downstreams.a.outcomes.keep: must be 0 (no records) or 1s..2160h (90 days), got 500ms (env SHAPER_DOWNSTREAMS_A_OUTCOMES_KEEP)
downstreams.a.outcomes.max_records: must be 1..10000000, got 0 (env SHAPER_DOWNSTREAMS_A_OUTCOMES_MAX_RECORDS)
downstreams.a.outcomes.result_bytes: must be 0..1MiB (0 keeps none of the answer's body), got 2MiB (env SHAPER_DOWNSTREAMS_A_OUTCOMES_RESULT_BYTES)
downstreams.b.outcomes.keep: must be 0 (no records) or 1s..2160h (90 days), got 2161h (env SHAPER_DOWNSTREAMS_B_OUTCOMES_KEEP)
downstreams.b.outcomes.max_records: must be 1..10000000, got 10000001 (env SHAPER_DOWNSTREAMS_B_OUTCOMES_MAX_RECORDS)
downstreams.c.outcomes.events: needs outcomes.keep above 0 (an event carries the job's record, and keep 0 keeps none); set keep, e.g. 24h, or events false (env SHAPER_DOWNSTREAMS_C_OUTCOMES_EVENTS)
downstreams.d.outcomes.events: "maybe" is not true or false (env SHAPER_DOWNSTREAMS_D_OUTCOMES_EVENTS)
downstreams.d.outcomes.keep: "soon" is not a duration; write e.g. 10s, 1m30s or 2h (env SHAPER_DOWNSTREAMS_D_OUTCOMES_KEEP)
downstreams.d.outcomes.kept: unknown key; valid keys here: keep, result_bytes, events, max_records
downstreams.d.outcomes.result_bytes: "1MB" is not a size: units are binary, write e.g. 64KiB or 1MiB (env SHAPER_DOWNSTREAMS_D_OUTCOMES_RESULT_BYTES)`
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}

// The two prefixes are subjects without wildcards, of their own: they
// overlap neither the intake, the durable queues nor each other, and no
// dead-letter or sink subject is under one.
func TestOutcomePrefixes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *Config, d *Downstream)
		want   string
	}{
		{"defaults", func(*Config, *Downstream) {}, ""},
		{"wildcard", func(c *Config, _ *Downstream) { c.Ingress.StatusPrefix = "shaper.status.>" },
			`ingress.status_prefix: "shaper.status.>" is not a NATS subject without wildcards; use dot-separated tokens without spaces, * or >, e.g. shaper.jobs (env SHAPER_INGRESS_STATUS_PREFIX)`},
		{"empty", func(c *Config, _ *Downstream) { c.Ingress.EventsPrefix = "" },
			`ingress.events_prefix: required; write a NATS subject, e.g. shaper.jobs (env SHAPER_INGRESS_EVENTS_PREFIX)`},
		{"under the intake", func(c *Config, _ *Downstream) { c.Ingress.StatusPrefix = "shaper.jobs.status" },
			`ingress.status_prefix: "shaper.jobs.status" overlaps ingress.subject_prefix "shaper.jobs", so status requests would be taken as jobs; use another subject, e.g. shaper.status (env SHAPER_INGRESS_STATUS_PREFIX)`},
		{"the queues'", func(c *Config, _ *Downstream) { c.Ingress.EventsPrefix = "shaper.queue" },
			`ingress.events_prefix: "shaper.queue" overlaps nats.jetstream.subject_prefix "shaper.queue", where durable queues keep their jobs; use another subject, e.g. shaper.events (env SHAPER_INGRESS_EVENTS_PREFIX)`},
		{"each other", func(c *Config, _ *Downstream) { c.Ingress.StatusPrefix, c.Ingress.EventsPrefix = "acme", "acme.events" },
			`ingress.events_prefix: "acme.events" overlaps ingress.status_prefix "acme"; status requests and events need subjects of their own, e.g. shaper.events (env SHAPER_INGRESS_EVENTS_PREFIX)`},
		{"dead letters under events", func(_ *Config, d *Downstream) { d.DeadLetter = "shaper.events.dead" },
			`downstreams.pay.dead_letter: "shaper.events.dead" is under ingress.events_prefix "shaper.events", where jobs' events are published; use another subject, e.g. shaper.dead.pay (env SHAPER_DOWNSTREAMS_PAY_DEAD_LETTER)`},
		{"dead letters of the default prefix", func(c *Config, _ *Downstream) { c.Ingress.StatusPrefix = "shaper.dead" },
			`downstreams.pay.dead_letter: "shaper.dead.pay" is under ingress.status_prefix "shaper.dead", where jobs' status is asked; use another subject, e.g. shaper.dead.pay (env SHAPER_DOWNSTREAMS_PAY_DEAD_LETTER)`},
		{"sink under status", func(_ *Config, d *Downstream) {
			d.Sink = Sink{NATS: &NATSSink{Subject: "shaper.status.pay", Timeout: time.Second}}
		}, `downstreams.pay.sink.nats.subject: "shaper.status.pay" is under ingress.status_prefix "shaper.status", where jobs' status is asked; use another subject (env SHAPER_DOWNSTREAMS_PAY_SINK_NATS_SUBJECT)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Defaults()
			d := DefaultDownstream()
			d.Rate, d.Queue.Capacity = 2, 10
			d.Sink.HTTP = &HTTPSink{URL: "http://h/", Method: "POST", Timeout: time.Second}
			tt.change(&c, &d)
			c.Downstreams = map[string]Downstream{"pay": d}
			c = c.withDeadLetterSubjects()
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// The prefixes need a restart, like ingress.subject_prefix; a
// downstream's outcomes apply in place.
func TestOutcomesReload(t *testing.T) {
	t.Parallel()
	old, err := LoadWith("testdata/outcomes.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	next, _ := LoadWith("testdata/outcomes.yaml", noEnv)
	pay := next.Downstreams["pay"]
	pay.Outcomes = Outcomes{Keep: time.Hour, MaxRecords: 5}
	next.Downstreams["pay"] = pay
	if got := RestartRequired(old, next); got != nil {
		t.Errorf("RestartRequired = %q after an outcomes change, want none", got)
	}
	next.Ingress.StatusPrefix, next.Ingress.EventsPrefix = "ops.status", "ops.events"
	if got, want := RestartRequired(old, next), []string{"ingress.events_prefix", "ingress.status_prefix"}; !slices.Equal(got, want) {
		t.Errorf("RestartRequired = %q, want %q", got, want)
	}
}
