package deploy_test

// The container image of deploy/Dockerfile, built without a Docker engine:
// the final stage's instructions are read from the Dockerfile and carried
// out with go-containerregistry, so the image here and the one `docker
// build` makes hold the same files and config. What the build stage makes
// (/out/...) is made here the way its RUN line makes it; what it takes from
// the golang image (CA certificates, zoneinfo) is taken from this
// machine's copy, which is Debian's, as the golang image's is.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// defaultPath is the PATH docker build gives an image that sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// imageEpoch is every file's and the image's time: the same inputs give
// the same image digest.
var imageEpoch = time.Unix(0, 0).UTC()

// copyLine is one COPY of the final stage.
type copyLine struct {
	line  string // as written, for the layer's history
	from  string // "" for the build context (the repository root)
	chown string // uid:gid, "" for root
	srcs  []string
	dest  string
}

// finalStage is the final stage of the Dockerfile, interpreted.
type finalStage struct {
	copies []copyLine
	config v1.Config
}

// readFinalStage interprets the last stage of deploy/Dockerfile. An
// instruction it does not know fails the test: teach it here rather than
// build an image that differs from docker build's.
func readFinalStage(t *testing.T) finalStage {
	t.Helper()
	ins := parseDockerfile(t, "Dockerfile")
	final := ins[len(ins)-1].stage
	s := finalStage{config: v1.Config{Labels: map[string]string{}, ExposedPorts: map[string]struct{}{}, Volumes: map[string]struct{}{}}}
	c := &s.config
	for _, in := range ins {
		if in.stage != final {
			continue
		}
		switch in.cmd {
		case "FROM":
			if f := strings.Fields(in.args); f[len(f)-1] != "scratch" {
				t.Fatalf("Dockerfile: the final stage is FROM %s; this test builds on scratch only", in.args)
			}
		case "COPY":
			s.copies = append(s.copies, parseCopy(t, in.args))
		case "ENTRYPOINT":
			c.Entrypoint = execForm(t, in)
		case "CMD":
			c.Cmd = execForm(t, in)
		case "USER":
			c.User = in.args
		case "WORKDIR":
			c.WorkingDir = in.args
		case "STOPSIGNAL":
			c.StopSignal = in.args
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				c.ExposedPorts[p] = struct{}{}
			}
		case "VOLUME":
			vols := strings.Fields(in.args)
			if strings.HasPrefix(in.args, "[") {
				vols = execForm(t, in)
			}
			for _, v := range vols {
				c.Volumes[v] = struct{}{}
			}
		case "LABEL":
			maps.Copy(c.Labels, keyValues(t, in))
		case "ENV":
			kv := keyValues(t, in)
			for _, k := range slices.Sorted(maps.Keys(kv)) {
				c.Env = append(c.Env, k+"="+kv[k])
			}
		case "HEALTHCHECK":
			c.Healthcheck = healthConfig(t, in)
		default:
			t.Fatalf("Dockerfile: %s in the final stage: image_build_test.go does not know it yet; teach it", in.cmd)
		}
	}
	if !slices.ContainsFunc(c.Env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		c.Env = append([]string{defaultPath}, c.Env...)
	}
	return s
}

// execForm decodes a JSON-array argument (the exec form: scratch has no
// shell to run the shell form).
func execForm(t *testing.T, in instruction) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
		t.Fatalf("Dockerfile: %s %s: want the exec form [\"...\"] (scratch has no shell): %v", in.cmd, in.args, err)
	}
	return argv
}

// keyValues parses LABEL/ENV's k=v k2="v 2" (and the old ENV k v form).
func keyValues(t *testing.T, in instruction) map[string]string {
	t.Helper()
	words := shellWords(in.args)
	out := map[string]string{}
	if in.cmd == "ENV" && len(words) > 0 && !strings.Contains(words[0], "=") {
		k, v, _ := strings.Cut(in.args, " ")
		out[k] = v
		return out
	}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			t.Fatalf("Dockerfile: %s %s: %q is not key=value", in.cmd, in.args, w)
		}
		out[k] = v
	}
	return out
}

// shellWords splits on spaces outside double quotes, dropping the quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted, started := false, false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"':
			quoted, started = !quoted, true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case ch == ' ' && !quoted:
			if started || cur.Len() > 0 {
				words = append(words, cur.String())
			}
			cur.Reset()
			started = false
		default:
			cur.WriteByte(ch)
		}
	}
	if started || cur.Len() > 0 {
		words = append(words, cur.String())
	}
	return words
}

// healthConfig reads HEALTHCHECK [--interval=...] CMD [...] as docker
// build records it.
func healthConfig(t *testing.T, in instruction) *v1.HealthConfig {
	t.Helper()
	if in.args == "NONE" {
		return &v1.HealthConfig{Test: []string{"NONE"}}
	}
	opts, cmd, ok := strings.Cut(in.args, "CMD ")
	if !ok {
		t.Fatalf("Dockerfile: HEALTHCHECK %s: want [options] CMD [...]", in.args)
	}
	hc := &v1.HealthConfig{Test: append([]string{"CMD"}, execForm(t, instruction{cmd: "HEALTHCHECK CMD", args: cmd})...)}
	for _, o := range strings.Fields(opts) {
		k, v, _ := strings.Cut(strings.TrimPrefix(o, "--"), "=")
		var err error
		switch k {
		case "interval":
			hc.Interval, err = time.ParseDuration(v)
		case "timeout":
			hc.Timeout, err = time.ParseDuration(v)
		case "start-period":
			hc.StartPeriod, err = time.ParseDuration(v)
		case "retries":
			hc.Retries, err = strconv.Atoi(v)
		default:
			t.Fatalf("Dockerfile: HEALTHCHECK option %s: image_build_test.go does not know it yet", o)
		}
		if err != nil {
			t.Fatalf("Dockerfile: HEALTHCHECK %s: %v", o, err)
		}
	}
	return hc
}

func parseCopy(t *testing.T, args string) copyLine {
	t.Helper()
	c := copyLine{line: "COPY " + args}
	var paths []string
	for _, f := range strings.Fields(args) {
		switch k, v, _ := strings.Cut(f, "="); {
		case k == "--from":
			c.from = v
		case k == "--chown":
			c.chown = v
		case strings.HasPrefix(f, "--"):
			t.Fatalf("Dockerfile: COPY %s: image_build_test.go does not know %s yet", args, f)
		default:
			paths = append(paths, f)
		}
	}
	if len(paths) < 2 {
		t.Fatalf("Dockerfile: COPY %s: want SRC... DEST", args)
	}
	c.srcs, c.dest = paths[:len(paths)-1], paths[len(paths)-1]
	return c
}

// buildStage is what the build stage's RUN lines leave under /out: the
// go build -o targets, mkdir -p directories and echo '...' > files.
type buildStage struct {
	binaries map[string]string // /out/shaperd → the binary built here
	dirs     map[string]bool
	files    map[string][]byte
}

var (
	goBuildOut = regexp.MustCompile(`go build .*?-o (/\S+) (\./\S+)`)
	mkdirOut   = regexp.MustCompile(`mkdir -p (/\S+)`)
	echoOut    = regexp.MustCompile(`echo '([^']*)' > (/\S+)`)
)

func readBuildStage(t *testing.T) buildStage {
	t.Helper()
	b := buildStage{binaries: map[string]string{}, dirs: map[string]bool{}, files: map[string][]byte{}}
	bins := builtBinaries(t)
	for _, in := range parseDockerfile(t, "Dockerfile") {
		if in.cmd != "RUN" {
			continue
		}
		for _, m := range goBuildOut.FindAllStringSubmatch(in.args, -1) {
			bin, ok := bins[m[2]]
			if !ok {
				t.Fatalf("Dockerfile: go build %s: builtBinaries does not build it; add it there", m[2])
			}
			b.binaries[m[1]] = bin
		}
		for _, m := range mkdirOut.FindAllStringSubmatch(in.args, -1) {
			b.dirs[m[1]] = true
		}
		for _, m := range echoOut.FindAllStringSubmatch(in.args, -1) {
			b.files[m[2]] = []byte(m[1] + "\n")
		}
	}
	return b
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// builtBinaries builds both commands once per test run as the Dockerfile
// does (TestDockerfile checks it says so): static, -trimpath, no symbol
// tables. Every test that runs shaperctl runs this one, the shipped one.
func builtBinaries(t *testing.T) map[string]string {
	t.Helper()
	pkgs := []string{"./cmd/shaperd", "./cmd/shaperctl"}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "shaperd-image-bin"); binErr != nil {
			return
		}
		start := time.Now()
		cmd := exec.Command("go", append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", binDir + "/"}, pkgs...)...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = err
			binDir = string(out)
		}
		t.Logf("built %s in %s (CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\")", strings.Join(pkgs, " "), time.Since(start).Round(time.Millisecond))
	})
	if binErr != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), binErr, binDir)
	}
	out := map[string]string{}
	for _, p := range pkgs {
		out[p] = filepath.Join(binDir, path.Base(p))
	}
	return out
}

// entry is one file, directory or symlink of a layer.
type entry struct {
	hdr  tar.Header // Name is absolute, without a trailing slash
	host string     // where a regular file's bytes are, or
	data []byte
}

// copyEntries expands one COPY into the entries docker build would put in
// its layer, parent directories included.
func copyEntries(t *testing.T, c copyLine, b buildStage) []entry {
	t.Helper()
	uid, gid := 0, 0
	if c.chown != "" {
		u, g, _ := strings.Cut(c.chown, ":")
		uid, _ = strconv.Atoi(u)
		gid, _ = strconv.Atoi(g)
	}
	byName := map[string]entry{}
	for _, src := range c.srcs {
		dest := c.dest
		isDir := b.dirs[src]
		if !isDir && c.from == "" {
			st, err := os.Stat(filepath.Join(repoRoot, src))
			isDir = err == nil && st.IsDir()
		}
		if !isDir && c.from != "" && !b.isBuilt(src) {
			st, err := os.Stat(src)
			isDir = err == nil && st.IsDir()
		}
		if !isDir && (strings.HasSuffix(dest, "/") || len(c.srcs) > 1) {
			dest = path.Join(dest, path.Base(src))
		}
		for _, e := range sourceEntries(t, c, b, src, path.Clean(dest)) {
			e.hdr.Uid, e.hdr.Gid = uid, gid
			byName[e.hdr.Name] = e
		}
	}
	for name := range maps.Clone(byName) {
		for dir := path.Dir(name); dir != "/"; dir = path.Dir(dir) {
			if _, ok := byName[dir]; !ok {
				byName[dir] = entry{hdr: tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}}
			}
		}
	}
	out := slices.Collect(maps.Values(byName))
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.hdr.Name, b.hdr.Name) })
	return out
}

func (b buildStage) isBuilt(p string) bool {
	_, bin := b.binaries[p]
	_, file := b.files[p]
	return bin || file || b.dirs[p]
}

// sourceEntries is what src (a path in the build stage, or in the context
// for c.from == "") becomes at dest.
func sourceEntries(t *testing.T, c copyLine, b buildStage, src, dest string) []entry {
	t.Helper()
	switch {
	case c.from != "" && b.binaries[src] != "":
		return []entry{{hdr: tar.Header{Name: dest, Typeflag: tar.TypeReg, Mode: 0o755}, host: b.binaries[src]}}
	case c.from != "" && b.files[src] != nil:
		return []entry{{hdr: tar.Header{Name: dest, Typeflag: tar.TypeReg, Mode: 0o644}, data: b.files[src]}}
	case c.from != "" && b.dirs[src]:
		return []entry{{hdr: tar.Header{Name: dest, Typeflag: tar.TypeDir, Mode: 0o755}}}
	case c.from != "" && strings.HasPrefix(src, "/out/"):
		t.Fatalf("Dockerfile: %s: no RUN line that this test understands makes %s; teach readBuildStage", c.line, src)
	}
	host := src
	if c.from == "" {
		host = filepath.Join(repoRoot, src)
	}
	if _, err := os.Lstat(host); err != nil {
		t.Skipf("Dockerfile: %s: this test takes %s from this machine (the golang image has Debian's), and it is missing here: %v", c.line, src, err)
	}
	return hostEntries(t, host, dest)
}

// hostEntries walks a file or directory of this machine into entries at
// dest, keeping modes and symlinks as COPY does.
func hostEntries(t *testing.T, host, dest string) []entry {
	t.Helper()
	var out []entry
	err := filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(host, p)
		e := entry{hdr: tar.Header{Name: path.Join(dest, filepath.ToSlash(rel)), Mode: int64(info.Mode().Perm())}}
		switch {
		case d.IsDir():
			e.hdr.Typeflag = tar.TypeDir
		case info.Mode()&fs.ModeSymlink != 0:
			e.hdr.Typeflag = tar.TypeSymlink
			e.hdr.Linkname, err = os.Readlink(p)
		case info.Mode().IsRegular():
			e.hdr.Typeflag, e.host = tar.TypeReg, p
		default:
			t.Fatalf("%s: neither a file, a directory nor a symlink", p)
		}
		out = append(out, e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// layer writes entries as a gzipped tar (gzip's default level, as docker
// build's) and returns it as an OCI layer.
func layer(t *testing.T, entries []entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.hdr
		h.Name = strings.TrimPrefix(h.Name, "/")
		h.ModTime, h.Format = imageEpoch, tar.FormatPAX
		data := e.data
		if e.host != "" {
			var err error
			if data, err = os.ReadFile(e.host); err != nil {
				t.Fatal(err)
			}
		}
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gz := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// buildImage makes the final stage's image on an empty (scratch) base: one
// layer per COPY, then the config.
func buildImage(t *testing.T, s finalStage, b buildStage) (v1.Image, map[string]entry) {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	want := map[string]entry{}
	var adds []mutate.Addendum
	for _, c := range s.copies {
		entries := copyEntries(t, c, b)
		for _, e := range entries {
			want[e.hdr.Name] = e
		}
		adds = append(adds, mutate.Addendum{Layer: layer(t, entries),
			History: v1.History{CreatedBy: c.line, Created: v1.Time{Time: imageEpoch}}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config = s.config
	cf.OS, cf.Architecture, cf.Created = "linux", runtime.GOARCH, v1.Time{Time: imageEpoch}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img, want
}
