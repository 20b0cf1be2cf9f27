package deploy_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const promtoolTestsPath = "testdata/alerts_test.yml"

// TestAlertsPromtool runs promtool's rule unit tests (testdata/alerts_test.yml)
// against alerts.yml: synthetic series for which an alert must fire, with
// its labels and rendered annotations, and series for which it must not.
// They cover the process alerts, whose evidence takes hours (a restart
// loop, memory growth); TestAgainstPrometheus covers the per-downstream
// ones against a live daemon. Every alert that reads a process_* series
// must have a case there.
func TestAlertsPromtool(t *testing.T) {
	b, err := os.ReadFile(promtoolTestsPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, sels := range alertSelectors(t) {
		for _, s := range sels {
			if strings.HasPrefix(s.name, "process_") && !strings.Contains(string(b), "alertname: "+name+"\n") {
				t.Errorf("%s: alert %s reads %s but has no case in %s", alertsPath, name, s.name, promtoolTestsPath)
				break
			}
		}
	}
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED: no promtool on PATH, so the alerts' unit tests in " + promtoolTestsPath + " were NOT run. " +
			"Install Debian's prometheus package, which ships it (apt-get install prometheus; .ci/run does when apt is reachable).")
	}
	cmd := exec.Command(bin, "test", "rules", "alerts_test.yml")
	cmd.Dir = "testdata"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules %s: %v\n%s", promtoolTestsPath, err, out)
	}
}
