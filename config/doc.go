// Package config turns a YAML file and SHAPER_* environment variables into a
// validated Config, and converts it into shaper.Settings.
package config
