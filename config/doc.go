// Package config turns a YAML file and SHAPER_* environment variables into a
// validated Config, and converts it into shaper.Settings. It is the only
// package that imports viper.
//
// Keys, defaults and the file format are those of docs/configuration.md.
// Choices worth knowing:
//
//   - Rates are N/s, N/m or N/h with N a plain decimal (0.5/s); a bare
//     number is an error, since its unit would be a guess.
//   - Sizes are B, KiB, MiB or GiB (binary, case-insensitive); a plain
//     integer is bytes, as in nats-server's max_payload. KB and MB are
//     refused rather than guessed.
//   - Durations are Go durations (10s, 1m30s); a bare number other than 0 is
//     an error (mapstructure would read 10 as 10ns).
//   - queue.max_wait defaults to 0: no limit, jobs wait as long as the
//     queue holds them.
//   - queue.backend defaults to jetstream and is kept as configured; whether
//     this build can run it is the daemon's decision, never a fallback here.
//   - Keys are case-insensitive (viper lower-cases them), and so are
//     downstream and header names: "Printer" becomes "printer".
//
// Env: every key that holds a value has an env var, EnvName(key): SHAPER_ and
// the key path upper-cased with '.' and '-' as '_'. That includes the keys of
// every downstream named in the file and of its headers
// (SHAPER_DOWNSTREAMS_LEGACY_ERP_SINK_HTTP_HEADERS_X_API_KEY), but env cannot
// create a downstream. Two downstreams whose env vars would collide
// (legacy-erp and legacy_erp) are an error.
//
// Errors: Load and Validate report every problem at once, one *Problem per
// line, sorted by key, in the form
//
//	downstreams.printer.rate: "fast" is not a rate; write e.g. 2/s or 120/m (env SHAPER_DOWNSTREAMS_PRINTER_RATE)
//
// Secrets (nats.password, nats.token, admin.basic_auth.password_hash, header
// values, URL credentials) never appear in messages, String or Redacted.
package config
