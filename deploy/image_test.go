package deploy_test

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The image's size bounds: as pushed (gzipped layers, config, manifest) and
// unpacked. Today about 15 MiB and 38 MiB, nearly all of it the two
// binaries; a binary that keeps its symbol tables, or an extra directory
// copied in, goes over.
const (
	maxImagePushed   = 24 << 20
	maxImageUnpacked = 56 << 20
)

// imageTarEnv names a file to write the image to as a tarball that
// `docker load -i` and `podman load -i` take (tag shaperd:dev).
const imageTarEnv = "SHAPER_IMAGE_TAR"

// imageFile is one entry of the image's flattened filesystem.
type imageFile struct {
	hdr  tar.Header
	data []byte
}

// TestImage builds deploy/Dockerfile's image without a Docker engine or a
// registry (image_build_test.go: an empty base, one layer per COPY of the
// final stage, the config its instructions set), writes it as an OCI
// layout, reads it back and checks what a container would get: the config,
// every file the Dockerfile copies and nothing else, static binaries that
// run, the non-root user, and the size.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the image's binaries are built for this machine; it runs %s, not linux", runtime.GOOS)
	}
	if raceEnabled {
		// About 40 s under -race (gzip and sha256 of 36 MiB, instrumented)
		// for nothing the detector could find: the test runs no goroutines.
		t.Skip("skipped under -race: single-threaded, and the plain go test run builds and checks the image")
	}
	start := time.Now()
	stage := readFinalStage(t)
	build := readBuildStage(t)
	built := time.Now()
	img, want := buildImage(t, stage, build)
	dir := filepath.Join(t.TempDir(), "oci")
	writeLayout(t, dir, img)
	if out := os.Getenv(imageTarEnv); out != "" {
		tag, _ := name.NewTag("shaperd:dev")
		if err := tarball.WriteToFile(out, tag, img); err != nil {
			t.Fatalf("%s=%s: %v", imageTarEnv, out, err)
		}
		t.Logf("wrote %s: docker load -i %s", out, out)
	}
	got := readLayout(t, dir)
	if err := validate.Image(got); err != nil {
		t.Fatalf("the OCI layout's image does not validate (digests, diff ids, sizes): %v", err)
	}
	checkImageConfig(t, got, stage.config)
	files := imageFiles(t, got)
	checkImageFiles(t, files, want)
	checkImageContents(t, files, stage.config)
	checkImageSize(t, got, files)
	runImageBinaries(t, files, stage.config)
	t.Logf("binaries %s, image built, written, read back and checked in %s",
		built.Sub(start).Round(time.Millisecond), time.Since(built).Round(time.Millisecond))
}

func writeLayout(t *testing.T, dir string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "shaperd:dev"})); err != nil {
		t.Fatalf("write the OCI layout: %v", err)
	}
}

func readLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Fatalf("the OCI layout's index: want one OCI image manifest, got %+v", im.Manifests)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkImageConfig checks the config read back: what the Dockerfile says
// (the same JSON as the config derived from it) and, independently, what
// the rest of deploy/ relies on.
func checkImageConfig(t *testing.T, img v1.Image, want v1.Config) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	gotJSON, _ := json.Marshal(c)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("image config read back:\n%s\nthe Dockerfile's:\n%s", gotJSON, wantJSON)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/shaperd"}) {
		t.Errorf("Entrypoint %q, want [/usr/local/bin/shaperd]", c.Entrypoint)
	}
	if i := slices.Index(c.Cmd, "-config"); i < 0 || i+1 >= len(c.Cmd) || c.Cmd[i+1] != configPath {
		t.Errorf("Cmd %q, want -config %s", c.Cmd, configPath)
	}
	if c.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532 (non-root)", c.User)
	}
	for _, p := range []string{"4222/tcp", "9090/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("ExposedPorts %v lack %s", c.ExposedPorts, p)
		}
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("Volumes %v lack /data (store_dir's volume)", c.Volumes)
	}
	if c.Labels["org.opencontainers.image.title"] != "shaperd" || !strings.HasPrefix(c.Labels["org.opencontainers.image.source"], "https://") {
		t.Errorf("Labels %v: want org.opencontainers.image.title=shaperd and an https:// org.opencontainers.image.source", c.Labels)
	}
	if !slices.Contains(c.Env, defaultPath) {
		t.Errorf("Env %q lacks %s", c.Env, defaultPath)
	}
	hc := c.Healthcheck
	if hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/usr/local/bin/shaperctl", "health"}) || hc.Timeout <= 3*time.Second || hc.Interval <= 0 {
		t.Errorf("Healthcheck %+v: want CMD shaperctl health, a --timeout above health's own 3s, an --interval", hc)
	}
	if c.StopSignal != "SIGTERM" {
		t.Errorf("StopSignal %q, want SIGTERM (graceful drain)", c.StopSignal)
	}
}

// imageFiles flattens the image's layers as a container runtime would.
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("read the image's filesystem: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = imageFile{hdr: *h, data: data}
	}
}

// checkImageFiles checks that the image holds exactly the files the
// Dockerfile's COPY lines put there, with their type, mode and owner.
func checkImageFiles(t *testing.T, files map[string]imageFile, want map[string]entry) {
	t.Helper()
	for p, w := range want {
		f, ok := files[p]
		switch {
		case !ok:
			t.Errorf("the image lacks %s, which the Dockerfile copies", p)
		case f.hdr.Typeflag != w.hdr.Typeflag || f.hdr.Mode != w.hdr.Mode || f.hdr.Uid != w.hdr.Uid || f.hdr.Gid != w.hdr.Gid || f.hdr.Linkname != w.hdr.Linkname:
			t.Errorf("%s: type %c mode %o owner %d:%d link %q, want %c %o %d:%d %q", p, f.hdr.Typeflag, f.hdr.Mode, f.hdr.Uid, f.hdr.Gid,
				f.hdr.Linkname, w.hdr.Typeflag, w.hdr.Mode, w.hdr.Uid, w.hdr.Gid, w.hdr.Linkname)
		}
	}
	for p := range files {
		if _, ok := want[p]; !ok {
			t.Errorf("the image holds %s, which no COPY of the Dockerfile puts there", p)
		}
	}
	// What the rest of deploy/ names, so an edit of the COPY lines that
	// drops one fails here too.
	for _, p := range []string{"/usr/local/bin/shaperd", "/usr/local/bin/shaperctl", configPath, "/etc/passwd",
		"/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo", "/data"} {
		if _, ok := files[p]; !ok {
			t.Errorf("the image lacks %s", p)
		}
	}
}

// checkImageContents checks what the files hold: static executables, the
// passwd entry of the image's user, the config shaperd reads, certificates
// and time zones that load, and the volume the user can write.
func checkImageContents(t *testing.T, files map[string]imageFile, c v1.Config) {
	t.Helper()
	for _, p := range []string{c.Entrypoint[0], c.Healthcheck.Test[1]} {
		f := files[p]
		if f.hdr.Typeflag != tar.TypeReg || f.hdr.Mode&0o111 == 0 {
			t.Errorf("%s: not an executable file (type %c, mode %o)", p, f.hdr.Typeflag, f.hdr.Mode)
			continue
		}
		if err := staticELF(f.data); err != nil {
			t.Errorf("%s: %v (scratch has no libc or loader)", p, err)
		}
	}
	uid, gid, _ := strings.Cut(c.User, ":")
	if !slices.ContainsFunc(strings.Split(string(files["/etc/passwd"].data), "\n"), func(l string) bool {
		f := strings.Split(l, ":")
		return len(f) == 7 && f[2] == uid && f[3] == gid && f[5] == "/data"
	}) {
		t.Errorf("/etc/passwd has no entry for the image's user %s with home /data:\n%s", c.User, files["/etc/passwd"].data)
	}
	if d := files["/data"].hdr; d.Typeflag != tar.TypeDir || d.Uid != 65532 || d.Gid != 65532 {
		t.Errorf("/data: type %c owner %d:%d, want a directory owned by 65532:65532 (store_dir is on it)", d.Typeflag, d.Uid, d.Gid)
	}
	yaml, err := os.ReadFile("docker-config.yaml")
	if err != nil || !bytes.Equal(files[configPath].data, yaml) {
		t.Errorf("%s differs from deploy/docker-config.yaml (%v)", configPath, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(files["/etc/ssl/certs/ca-certificates.crt"].data) {
		t.Error("/etc/ssl/certs/ca-certificates.crt holds no PEM certificate")
	}
	zone := resolve(files, "/usr/share/zoneinfo/Europe/Berlin")
	if _, err := time.LoadLocationFromTZData("Europe/Berlin", files[zone].data); err != nil {
		t.Errorf("/usr/share/zoneinfo/Europe/Berlin (%s): %v", zone, err)
	}
}

// staticELF reports why b is not a statically linked ELF executable.
func staticELF(b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return err
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errorString("dynamically linked (it has a PT_INTERP program header)")
		}
	}
	return nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// resolve follows symlinks in the image (zoneinfo has many).
func resolve(files map[string]imageFile, p string) string {
	for range 8 {
		f, ok := files[p]
		if !ok || f.hdr.Typeflag != tar.TypeSymlink {
			return p
		}
		if path.IsAbs(f.hdr.Linkname) {
			p = f.hdr.Linkname
		} else {
			p = path.Join(path.Dir(p), f.hdr.Linkname)
		}
	}
	return p
}

// checkImageSize bounds the image as pushed and unpacked.
func checkImageSize(t *testing.T, img v1.Image, files map[string]imageFile) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	pushed := m.Config.Size + int64(len(raw))
	for _, l := range m.Layers {
		pushed += l.Size
	}
	var unpacked int64
	for _, f := range files {
		unpacked += int64(len(f.data))
	}
	t.Logf("image: %d layers, %.1f MiB as pushed (gzip), %.1f MiB unpacked, %d files and directories",
		len(m.Layers), float64(pushed)/(1<<20), float64(unpacked)/(1<<20), len(files))
	if pushed > maxImagePushed || unpacked > maxImageUnpacked {
		t.Errorf("the image is %d bytes as pushed and %d unpacked; the bounds are %d and %d (maxImagePushed, maxImageUnpacked)",
			pushed, unpacked, maxImagePushed, maxImageUnpacked)
	}
}

// runImageBinaries runs the image's own entrypoint with its own Cmd and
// config file, checking the config only (-check-config), and its
// HEALTHCHECK binary's help: the files the container would run, run.
func runImageBinaries(t *testing.T, files map[string]imageFile, c v1.Config) {
	t.Helper()
	dir := t.TempDir()
	extract := func(p string, mode os.FileMode) string {
		out := filepath.Join(dir, path.Base(p))
		if err := os.WriteFile(out, files[p].data, mode); err != nil {
			t.Fatal(err)
		}
		return out
	}
	args := slices.Clone(c.Cmd)
	args[slices.Index(args, configPath)] = extract(configPath, 0o644)
	cmd := exec.Command(extract(c.Entrypoint[0], 0o755), append(args, "-check-config")...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHAPER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "config OK") {
		t.Errorf("the image's %s %s -check-config: %v\n%s", c.Entrypoint[0], strings.Join(c.Cmd, " "), err, out)
	}
	hc := c.Healthcheck.Test[1:]
	out, err := exec.Command(extract(hc[0], 0o755), append(hc[1:], "-h")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/healthz") {
		t.Errorf("the image's HEALTHCHECK command %q -h: %v\n%s", hc, err, out)
	}
}
