package main

import (
	"math"
	"strconv"
	"time"
)

// formatRate writes a per-second rate with the largest unit that keeps the
// number at least 1: 2/s, 30/m, 1/h.
func formatRate(perSec float64) string {
	switch {
	case perSec >= 1 || perSec <= 0:
		return formatNum(perSec) + "/s"
	case perSec*60 >= 1:
		return formatNum(perSec*60) + "/m"
	default:
		return formatNum(perSec*3600) + "/h"
	}
}

// formatNum prints f with at most 3 decimals and no trailing zeros.
func formatNum(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
}

// formatSeconds prints a duration in seconds with millisecond precision: 4.503s.
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}
