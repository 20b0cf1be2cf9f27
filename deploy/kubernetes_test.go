package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// k8sObject is the part of a manifest the tests read.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"` // ConfigMap
	Spec struct {
		// Deployment
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		// A Service's selector is a map, a Deployment's or ServiceMonitor's
		// has matchLabels: see k8sObject.selector.
		Selector yaml.Node `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		// ServiceMonitor
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		EnvFrom        []envFromSource `yaml:"envFrom"`
		LivenessProbe  probe           `yaml:"livenessProbe"`
		ReadinessProbe probe           `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			RunAsNonRoot             bool  `yaml:"runAsNonRoot"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
	Volumes []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		EmptyDir              any `yaml:"emptyDir"`
		PersistentVolumeClaim any `yaml:"persistentVolumeClaim"`
	} `yaml:"volumes"`
}

type envFromSource struct {
	SecretRef *struct {
		Name     string `yaml:"name"`
		Optional bool   `yaml:"optional"`
	} `yaml:"secretRef"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// readManifests decodes every YAML document under dir, checking that each
// has apiVersion, kind and metadata.name.
func readManifests(t *testing.T, dir string) map[string][]k8sObject {
	t.Helper()
	byKind := map[string][]k8sObject{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: document %d: %w", path, i, err)
			}
			var obj k8sObject
			if err := node.Decode(&obj); err != nil {
				return fmt.Errorf("%s: document %d: %w", path, i, err)
			}
			if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
				return fmt.Errorf("%s: document %d: want apiVersion, kind and metadata.name, got %q %q %q",
					path, i, obj.APIVersion, obj.Kind, obj.Metadata.Name)
			}
			byKind[obj.Kind] = append(byKind[obj.Kind], obj)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return byKind
}

func TestKubernetes(t *testing.T) {
	objs := readManifests(t, "kubernetes")
	for _, kind := range []string{"Deployment", "ConfigMap", "Service", "ServiceMonitor"} {
		if len(objs[kind]) != 1 {
			t.Fatalf("kubernetes/: want one %s, got %d (kinds: %v)", kind, len(objs[kind]), keysOf(objs))
		}
	}
	dep, cm, svc, mon := objs["Deployment"][0], objs["ConfigMap"][0], objs["Service"][0], objs["ServiceMonitor"][0]

	// The ConfigMap's config loads as shaperd would load it.
	path := filepath.Join(t.TempDir(), "shaper.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["shaper.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, path)

	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != "Recreate" {
		t.Errorf("Deployment: want replicas: 1 and strategy Recreate (in-memory queues, per-process rate)")
	}
	podLabels := dep.Spec.Template.Metadata.Labels
	if sel := dep.selector(t); len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("Deployment: selector %v does not match the pod labels %v", sel, podLabels)
	}
	pod := dep.Spec.Template.Spec
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("Deployment: pod securityContext must set runAsNonRoot and a non-zero runAsUser")
	}
	if min := minStopTimeout(cfg.ShutdownGrace); time.Duration(pod.TerminationGracePeriodSeconds)*time.Second < min {
		t.Errorf("Deployment: terminationGracePeriodSeconds %d is shorter than a graceful stop (%s)", pod.TerminationGracePeriodSeconds, min)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment: want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if _, tag, _ := strings.Cut(c.Image, ":"); tag == "" || tag == "latest" {
		t.Errorf("Deployment: image %q: pin a tag or digest", c.Image)
	}
	sc := c.SecurityContext
	if !sc.RunAsNonRoot || !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("Deployment: container securityContext must be runAsNonRoot, readOnlyRootFilesystem, allowPrivilegeEscalation: false, drop ALL; got %+v", sc)
	}
	if c.Resources.Limits["memory"] == "" || c.Resources.Requests["cpu"] == "" {
		t.Errorf("Deployment: want a memory limit and a CPU request, got %+v", c.Resources)
	}
	if !slices.ContainsFunc(c.EnvFrom, func(e envFromSource) bool { return e.SecretRef != nil && e.SecretRef.Optional }) {
		t.Errorf("Deployment: want envFrom an optional Secret for SHAPER_* secrets")
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if fmt.Sprint(ports["http-admin"]) != port(t, cfg.Admin.Listen) || fmt.Sprint(ports["nats"]) != port(t, cfg.NATS.Embedded.Listen) {
		t.Errorf("Deployment: container ports %v do not match admin.listen %s and nats.embedded.listen %s", ports, cfg.Admin.Listen, cfg.NATS.Embedded.Listen)
	}
	for name, pr := range map[string]probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if pr.HTTPGet.Path != name || ports[pr.HTTPGet.Port] == 0 {
			t.Errorf("Deployment: probe %+v, want path %s on a named container port", pr.HTTPGet, name)
		}
	}

	// Config from the ConfigMap at -config; store_dir on a writable volume.
	if i := slices.Index(c.Args, "-config"); i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != configPath {
		t.Errorf("Deployment: args %q, want -config %s", c.Args, configPath)
	}
	volumes := map[string]bool{} // name → is the ConfigMap
	for _, v := range pod.Volumes {
		volumes[v.Name] = v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name
	}
	var configMounted, storeMounted bool
	for _, m := range c.VolumeMounts {
		isCM, ok := volumes[m.Name]
		if !ok {
			t.Errorf("Deployment: volumeMount %q has no volume", m.Name)
		}
		configMounted = configMounted || (isCM && m.MountPath == filepath.Dir(configPath))
		storeMounted = storeMounted || (!isCM && !m.ReadOnly && strings.HasPrefix(cfg.NATS.Embedded.StoreDir, m.MountPath+"/"))
	}
	if !configMounted {
		t.Errorf("Deployment: ConfigMap %s is not mounted at %s", cm.Metadata.Name, filepath.Dir(configPath))
	}
	if !storeMounted {
		t.Errorf("Deployment: store_dir %s is not on a writable volume (the root filesystem is read-only)", cfg.NATS.Embedded.StoreDir)
	}

	// Service → pod, ServiceMonitor → Service.
	if sel := svc.selector(t); len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("Service: selector %v does not select the pod labels %v", sel, podLabels)
	}
	svcPorts := map[string]int{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = p.Port
		if ports[p.TargetPort] == 0 {
			t.Errorf("Service: port %s targets %q, not a container port name", p.Name, p.TargetPort)
		}
	}
	if svcPorts["http-admin"] != 9090 || svcPorts["nats"] != 4222 {
		t.Errorf("Service: want ports http-admin 9090 and nats 4222, got %v", svcPorts)
	}
	if mon.APIVersion != "monitoring.coreos.com/v1" || !subset(mon.selector(t), svc.Metadata.Labels) ||
		len(mon.Spec.Endpoints) == 0 || svcPorts[mon.Spec.Endpoints[0].Port] == 0 || mon.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor: want monitoring.coreos.com/v1 selecting the Service and scraping a named port's /metrics, got %+v", mon)
	}
}

// selector returns the object's label selector: a Service's spec.selector
// map, or spec.selector.matchLabels for the other kinds.
func (o k8sObject) selector(t *testing.T) map[string]string {
	t.Helper()
	var m map[string]string
	if o.Spec.Selector.IsZero() {
		return nil
	}
	if o.Kind == "Service" {
		if err := o.Spec.Selector.Decode(&m); err != nil {
			t.Fatalf("%s %s: spec.selector: %v", o.Kind, o.Metadata.Name, err)
		}
		return m
	}
	var s struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if err := o.Spec.Selector.Decode(&s); err != nil {
		t.Fatalf("%s %s: spec.selector: %v", o.Kind, o.Metadata.Name, err)
	}
	return s.MatchLabels
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
