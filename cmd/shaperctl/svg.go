package main

import (
	"bufio"
	"fmt"
	"github.com/shaperd/shaper/config"
	"io"
	"os"
	"strings"
	"time"
)

// chart is admitted vs offered over time, one panel per algorithm, all on
// the same time bins and the same y scale.
type chart struct {
	Title    string
	Span     time.Duration // from the first bin's start to the last bin's end
	BinWidth time.Duration
	Offered  []int // requests per bin
	Panels   []panel
}

// panel is one algorithm's row of the chart.
type panel struct {
	Name     string
	Caption  string
	Admitted []int // per bin, as Offered
}

// Chart geometry, in SVG user units.
const (
	svgWidth   = 760
	svgLeft    = 56
	svgRight   = 16
	svgHeader  = 56
	svgPanelH  = 120 // one panel: caption, plot, x labels
	svgPlotTop = 22  // plot offset inside a panel
	svgPlotH   = 76
	svgBins    = 60 // at most; nice bin widths give fewer
)

var panelColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// buildChart bins a simulation's offered and admitted requests.
func buildChart(o simOptions, events []event, results []algoResult) chart {
	start := events[0].At
	span := events[len(events)-1].At.Sub(start)
	if span <= 0 {
		span = time.Second
	}
	bw := niceStep((span + svgBins - 1) / svgBins)
	bins := int(span/bw) + 1 // the last event falls in the last bin
	span = bw * time.Duration(bins)
	offered := make([]time.Time, len(events))
	for i, e := range events {
		offered[i] = e.At
	}
	c := chart{
		Title: fmt.Sprintf("shaperctl simulate -pattern %s: %d per %s (token bucket, GCRA: rate %s, burst %d)",
			o.Pattern, o.Limit, config.FormatDuration(o.Window), formatRate(float64(o.Limit)/o.Window.Seconds()), o.Limit),
		Span: span, BinWidth: bw, Offered: binTimes(offered, start, bw, bins),
	}
	for _, r := range results {
		c.Panels = append(c.Panels, panel{
			Name: string(r.Mode),
			Caption: fmt.Sprintf("allowed %d of %d, at most %d in any %s", r.Allowed, r.Offered,
				r.MaxInWindow, config.FormatDuration(o.Window)),
			Admitted: binTimes(r.Admitted, start, bw, bins),
		})
	}
	return c
}

// niceStep rounds d up to 1, 2 or 5 × a power of ten nanoseconds, so bins
// read as 50ms or 5s.
func niceStep(d time.Duration) time.Duration {
	for p := time.Duration(1); ; p *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if m*p >= d {
				return m * p
			}
		}
	}
}

// binTimes counts times into n bins of width bw from start; times past the
// last bin count in it.
func binTimes(times []time.Time, start time.Time, bw time.Duration, n int) []int {
	bins := make([]int, n)
	for _, t := range times {
		i := int(t.Sub(start) / bw)
		bins[min(max(i, 0), n-1)]++
	}
	return bins
}

func writeSVGFile(path string, c chart) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-svg: %w", err)
	}
	bw := bufio.NewWriter(f)
	err = writeSVG(bw, c)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeSVG draws c as a standalone SVG document.
func writeSVG(w io.Writer, c chart) error {
	height := svgHeader + svgPanelH*len(c.Panels) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", svgLeft, esc(c.Title))
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="10" height="10" fill="#d0d0d0"/><text x="%d" y="39">offered</text>`, svgLeft, svgLeft+14)
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="10" height="10" fill="#555"/><text x="%d" y="39">admitted (requests per %s bin)</text>`+"\n",
		svgLeft+70, svgLeft+84, config.FormatDuration(c.BinWidth))
	ymax := 1
	for _, v := range c.Offered {
		ymax = max(ymax, v)
	}
	for i, p := range c.Panels {
		writePanel(&b, c, p, svgHeader+i*svgPanelH, ymax, panelColors[i%len(panelColors)])
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePanel draws one algorithm's panel with its top at y.
func writePanel(b *strings.Builder, c chart, p panel, y, ymax int, color string) {
	plotW := float64(svgWidth - svgLeft - svgRight)
	top, bottom := y+svgPlotTop, y+svgPlotTop+svgPlotH
	fmt.Fprintf(b, `<g><text x="%d" y="%d"><tspan font-weight="bold" fill="%s">%s</tspan>  %s</text>`+"\n",
		svgLeft, y+14, color, esc(p.Name), esc(p.Caption))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%g" height="%d" fill="none" stroke="#999"/>`+"\n", svgLeft, top, plotW, svgPlotH)
	bw := plotW / float64(len(c.Offered))
	bars := func(values []int, fill string) {
		for i, v := range values {
			if v == 0 {
				continue
			}
			h := float64(v) / float64(ymax) * svgPlotH
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				float64(svgLeft)+float64(i)*bw, float64(bottom)-h, max(bw-1, 0.5), h, fill)
		}
	}
	bars(c.Offered, "#d0d0d0")
	bars(p.Admitted, color)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%d</text>`, svgLeft-4, top+9, ymax)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", svgLeft-4, bottom)
	for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
		anchor := map[float64]string{0: "start", 1: "end"}[frac]
		if anchor == "" {
			anchor = "middle"
		}
		at := time.Duration(frac * float64(c.Span)).Round(time.Millisecond)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="%s" fill="#555">+%s</text>`, float64(svgLeft)+frac*plotW,
			bottom+13, anchor, config.FormatDuration(at))
	}
	b.WriteString("</g>\n")
}

// esc escapes text for SVG content and attributes.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
