package deploy_test

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shaperd/shaper/config"
)

// The paths every artifact agrees on.
const (
	configPath = "/etc/shaperd/shaper.yaml"
	repoRoot   = ".." // tests run in deploy/
)

// loadConfig loads path through config.Load as shaperd does, with every
// SHAPER_* variable of the test's environment blanked (Load ignores empty
// ones).
func loadConfig(t *testing.T, path string) config.Config {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SHAPER_") {
			t.Setenv(k, "")
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load(%s):\n%v", path, err)
	}
	return cfg
}

// minStopTimeout is how long shaperd may take to stop: draining intake and
// the shaper take up to shutdown_grace each, flushing NATS and stopping the
// admin server up to 5s each (daemon.Run's cleanups).
func minStopTimeout(grace time.Duration) time.Duration { return 2*grace + 10*time.Second }

func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("%q: %v", hostport, err)
	}
	return p
}

// --- systemd ---------------------------------------------------------------

// unitFile is a parsed systemd unit: section → key → values in order
// (keys such as SystemCallFilter may repeat).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u, section := unitFile{}, ""
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case section == "":
			t.Fatalf("%s:%d: key outside a section: %q", path, i+1, line)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s:%d: not key=value: %q", path, i+1, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	return u
}

func TestSystemdUnit(t *testing.T) {
	const path = "shaperd.service"
	u := parseUnit(t, path)
	svc := u["Service"]
	if svc == nil || u["Unit"] == nil || u["Install"] == nil {
		t.Fatalf("%s: want [Unit], [Service] and [Install] sections, got %v", path, keysOf(u))
	}
	want := map[string]string{
		"ExecStart":               "/usr/local/bin/shaperd -config " + configPath,
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"KillSignal":              "SIGTERM",
		"Restart":                 "on-failure",
		"EnvironmentFile":         "-/etc/shaperd/env",
		"DynamicUser":             "yes",
		"StateDirectory":          "shaperd",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"MemoryDenyWriteExecute":  "yes",
		"LockPersonality":         "yes",
		"RestrictNamespaces":      "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectKernelLogs":       "yes",
		"ProtectControlGroups":    "yes",
		"ProtectClock":            "yes",
		"ProtectHostname":         "yes",
		"RestrictRealtime":        "yes",
		"RestrictSUIDSGID":        "yes",
		"UMask":                   "0077",
	}
	for k, v := range want {
		got, ok := svc[k]
		if !ok {
			t.Errorf("%s: [Service] %s= is missing; want %s=%s", path, k, k, v)
			continue
		}
		if got[len(got)-1] != v { // the last assignment wins
			t.Errorf("%s: [Service] %s=%s, want %s=%s", path, k, got[len(got)-1], k, v)
		}
	}
	if !slices.Contains(svc["SystemCallFilter"], "@system-service") {
		t.Errorf("%s: SystemCallFilter=@system-service missing; got %q", path, svc["SystemCallFilter"])
	}

	// The service must outlive a graceful shutdown of the shipped config.
	cfg := loadConfig(t, "example.yaml")
	stop, err := time.ParseDuration(strings.Join(svc["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("%s: TimeoutStopSec=%q: want a duration like 45s: %v", path, svc["TimeoutStopSec"], err)
	}
	if min := minStopTimeout(cfg.ShutdownGrace); stop < min {
		t.Errorf("%s: TimeoutStopSec=%s is shorter than a graceful stop with shutdown_grace %s (%s)", path, stop, cfg.ShutdownGrace, min)
	}

	t.Run("systemd-analyze verify", func(t *testing.T) {
		bin := systemdAnalyze(t)
		unit := unitWithStub(t, path)
		out, err := exec.Command(bin, "verify", unit).CombinedOutput()
		if err != nil || bytes.Contains(out, []byte("shaperd.service:")) {
			t.Fatalf("systemd-analyze verify %s: %v\n%s", path, err, out)
		}
	})
	t.Run("systemd-analyze security", func(t *testing.T) {
		bin := systemdAnalyze(t)
		unit := unitWithStub(t, path)
		// Exposure is 0 (locked down) to 10 (unprotected); "OK" is below 4.
		out, err := exec.Command(bin, "security", "--offline=yes", "--threshold=20", unit).CombinedOutput()
		if bytes.Contains(out, []byte("unrecognized option")) {
			t.Skipf("this systemd-analyze has no offline security check (needs systemd >= 250): %s", out)
		}
		if err != nil {
			t.Fatalf("systemd-analyze security: exposure above 2.0 or error: %v\n%s", err, out)
		}
		t.Logf("%s", lastLine(out))
	})
}

// systemdAnalyze returns the path of systemd-analyze, or skips the test
// saying why: the INI checks above still ran.
func systemdAnalyze(t *testing.T) string {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("systemd-analyze is not installed (%v): checked the unit's keys only, not systemd's own parser", err)
	}
	return bin
}

// unitWithStub copies the unit, pointing /usr/local/bin/shaperd at an
// executable stub: verify rejects a unit whose ExecStart does not exist.
func unitWithStub(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	stub := filepath.Join(dir, "shaperd")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "shaperd.service")
	b = bytes.ReplaceAll(b, []byte("/usr/local/bin/shaperd"), []byte(stub))
	if err := os.WriteFile(unit, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return unit
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func keysOf[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// --- Docker ----------------------------------------------------------------

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	stage     int // index of the FROM it belongs to
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []instruction
		cur   strings.Builder
		stage = -1
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{cmd: cmd, args: strings.Join(strings.Fields(args), " "), stage: stage})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	const path = "Dockerfile"
	ins := parseDockerfile(t, path)
	args := map[string]string{} // ARG defaults before the first FROM
	var froms []instruction
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && in.stage < 0:
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case in.cmd == "FROM":
			froms = append(froms, in)
		}
	}
	if len(froms) < 2 {
		t.Fatalf("%s: want a multi-stage build (builder + runtime), got %d FROM", path, len(froms))
	}
	final := len(froms) - 1
	for _, f := range froms {
		image := fromImage(f.args, args)
		name, tag, _ := strings.Cut(image, ":")
		switch {
		case name == "scratch" && tag == "":
		case strings.Contains(image, "@sha256:"):
		case tag == "" || tag == "latest":
			t.Errorf("%s: FROM %s: pin a version tag or digest, never latest or none", path, image)
		}
	}
	checkBuilderGo(t, path, fromImage(froms[0].args, args))
	finalImage := fromImage(froms[final].args, args)
	if finalImage != "scratch" {
		t.Errorf("%s: final stage is %s, want scratch (static binaries, nothing else)", path, finalImage)
	}

	var build, user, healthcheck, entrypoint, cmd string
	var exposed []string
	var copies []string
	for _, in := range ins {
		switch {
		case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
			build += in.args + "\n"
		case in.stage != final:
		case in.cmd == "USER":
			user = in.args
		case in.cmd == "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case in.cmd == "HEALTHCHECK":
			healthcheck = in.args
		case in.cmd == "ENTRYPOINT":
			entrypoint = in.args
		case in.cmd == "CMD":
			cmd = in.args
		case in.cmd == "COPY":
			copies = append(copies, in.args)
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w"`, "./cmd/shaperd", "./cmd/shaperctl"} {
		if !strings.Contains(build, want) {
			t.Errorf("%s: the go build RUN lacks %s:\n%s", path, want, build)
		}
	}
	if finalImage == "scratch" && !slices.ContainsFunc(copies, func(c string) bool { return strings.Contains(c, "ca-certificates") }) {
		t.Errorf("%s: a scratch image needs the CA certificates copied in", path)
	}
	if uid, _, _ := strings.Cut(user, ":"); uid != "65532" {
		t.Errorf("%s: final stage USER %q, want 65532 (non-root)", path, user)
	}
	for _, p := range []string{"4222", "9090"} {
		if !slices.Contains(exposed, p) {
			t.Errorf("%s: EXPOSE lacks %s (got %v)", path, p, exposed)
		}
	}
	// /healthz is the one admin route that needs no credentials with
	// admin.basic_auth (and is what the daemon answers when alive); no
	// -admin, so SHAPER_ADMIN_URL can make it https://.
	if !strings.HasSuffix(healthcheck, `CMD ["/usr/local/bin/shaperctl", "health"]`) {
		t.Errorf("%s: HEALTHCHECK should run shaperctl health (GET /healthz), got %q", path, healthcheck)
	}
	if !strings.Contains(entrypoint+" "+cmd, `"-config", "`+configPath+`"`) {
		t.Errorf("%s: ENTRYPOINT/CMD should pass -config %s, got %s %s", path, configPath, entrypoint, cmd)
	}
	if !slices.Contains(copies, "deploy/docker-config.yaml "+configPath) {
		t.Errorf("%s: want COPY deploy/docker-config.yaml %s, got %q", path, configPath, copies)
	}
	// The build context is the repository root.
	for _, p := range []string{"go.mod", "go.sum", "cmd/shaperd", "cmd/shaperctl", "deploy/docker-config.yaml"} {
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
			t.Errorf("%s refers to %s: %v", path, p, err)
		}
	}

	// The image's config: what the Dockerfile exposes and probes.
	cfg := loadConfig(t, "docker-config.yaml")
	if p := port(t, cfg.Admin.Listen); p != "9090" || !strings.HasPrefix(cfg.Admin.Listen, "0.0.0.0:") {
		t.Errorf("docker-config.yaml: admin.listen %s, want 0.0.0.0:9090 (published and probed)", cfg.Admin.Listen)
	}
	help, _ := exec.Command(shaperctl(t), "health", "-h").CombinedOutput()
	if want := "default http://127.0.0.1:9090"; !strings.Contains(string(help), want) {
		t.Errorf("shaperctl health -h lacks %q: the HEALTHCHECK relies on that default:\n%s", want, help)
	}
	if cfg.NATS.URL != "" || cfg.NATS.Embedded.Listen != "0.0.0.0:4222" {
		t.Errorf("docker-config.yaml: want the embedded NATS server on 0.0.0.0:4222, got url %q listen %q", cfg.NATS.URL, cfg.NATS.Embedded.Listen)
	}
	if !strings.HasPrefix(cfg.NATS.Embedded.StoreDir, "/data/") {
		t.Errorf("docker-config.yaml: store_dir %q is not on the /data volume", cfg.NATS.Embedded.StoreDir)
	}
}

// checkBuilderGo checks that the builder image's Go satisfies go.mod's go
// directive: the golang images set GOTOOLCHAIN=local, so an older Go fails
// the build.
func checkBuilderGo(t *testing.T, path, image string) {
	t.Helper()
	name, tag, _ := strings.Cut(image, ":")
	if name != "golang" {
		t.Errorf("%s: the builder is %s, want a golang:<version> image", path, image)
		return
	}
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var need string
	for line := range strings.Lines(string(mod)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			need = v
		}
	}
	tagVersion, _, _ := strings.Cut(tag, "-") // 1.26.8-trixie
	if need == "" || !versionAtLeast(tagVersion, need) || strings.Count(tagVersion, ".") < 2 {
		t.Errorf("%s: builder golang:%s: want an exact patch release at least go.mod's go %s (e.g. golang:%s)", path, tag, need, need)
	}
}

// versionAtLeast compares dotted version numbers: 1.26.8 >= 1.26.8 > 1.26.
func versionAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := range max(len(h), len(w)) {
		var a, b int
		if i < len(h) {
			a, _ = strconv.Atoi(h[i])
		}
		if i < len(w) {
			b, _ = strconv.Atoi(w[i])
		}
		if a != b {
			return a > b
		}
	}
	return true
}

// fromImage returns the image of a FROM line, ${ARG}s expanded.
func fromImage(from string, args map[string]string) string {
	var image string
	for _, f := range strings.Fields(from) {
		if !strings.HasPrefix(f, "--") {
			image = f
			break
		}
	}
	return os.Expand(image, func(k string) string { return args[k] })
}

// shaperctl is the shaperctl of the image (builtBinaries), built once per
// test run.
func shaperctl(t *testing.T) string {
	t.Helper()
	return builtBinaries(t)["./cmd/shaperctl"]
}

// TestMain runs the tests, checks that none left a goroutine behind (the
// in-process daemons and NATS servers are stopped by their cleanups; the
// two long tests run in parallel, so no test can check alone) and removes
// the binaries built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" && binErr == nil {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak: goroutines left behind after the tests:\n", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}

// The YAML files that shaperd itself reads must load.
func TestConfigsLoad(t *testing.T) {
	for _, path := range []string{"example.yaml", "docker-config.yaml"} {
		t.Run(path, func(t *testing.T) { loadConfig(t, path) })
	}
}
