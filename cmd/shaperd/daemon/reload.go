package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/shaperd/shaper/config"
)

// Reload applies a config read again (SIGHUP). load's error, a change that
// needs a restart, or one the shaper refuses leaves the running config in
// place; every refusal is counted in shaper_config_reload_failures_total.
func (d *Daemon) Reload(load func() (config.Config, error)) error {
	d.metrics.reloads.Inc()
	err := d.reload(load)
	if err != nil {
		d.metrics.reloadFailures.Inc()
		d.log.Error("config reload refused; the running config stays", "err", err)
		return err
	}
	d.metrics.lastReloadSuccess.SetToCurrentTime()
	d.log.Info("config reloaded")
	return nil
}

func (d *Daemon) reload(load func() (config.Config, error)) error {
	next, err := load()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if keys := config.RestartRequired(d.cfg, next); len(keys) > 0 {
		var errs []error
		for _, k := range keys {
			errs = append(errs, fmt.Errorf("%s: changing it needs a restart; restart shaperd to apply it", k))
		}
		return errors.Join(errs...)
	}
	sh := d.live().sh
	if sh == nil {
		return errors.New("reload: the daemon is not running yet")
	}
	// The store is shared again among next's streams: the shrinking
	// shares first, so that the room they free is there for the others.
	was, err := d.replanStore(next)
	if err != nil {
		return err
	}
	d.setQueueShares(d.cfg, next, was, true)
	// The shaper is the authority on which lanes exist; the view only
	// labels intake-level rejections and finds dead-letter subjects, so a
	// message that falls between the two updates is still handled correctly.
	if err := sh.Apply(next.ShaperSettings()); err != nil {
		now := d.shares.plan.Load()
		d.shares.plan.Store(was)
		d.setQueueShares(d.cfg, d.cfg, now, false)
		return fmt.Errorf("apply config: %w", err)
	}
	d.setQueueShares(d.cfg, next, was, false)
	if c := d.live().ctl; c != nil {
		c.Reapply() // a downstream back in the config takes its kept changes again
	}
	d.view.Store(newView(next))
	d.deadMet.Labels(downstreamChanges(d.cfg, next))
	d.ensureDead(next, was)
	d.ensureOutcomes(context.Background(), next, d.live().outcomes)
	d.dedupe.SetWindow(next.Ingress.DedupeWindow)
	d.cfg = next
	return nil
}
