//go:build race

package test

// raceEnabled is true when the tests run under the race detector, which
// makes the largest floods several times slower.
const raceEnabled = true
