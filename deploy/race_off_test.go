//go:build !race

package deploy_test

// raceEnabled: this test binary was built with -race.
const raceEnabled = false
