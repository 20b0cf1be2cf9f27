// Package deploy holds deployment artifacts; its tests check them against the daemon.
//
// The artifacts are the systemd unit (shaperd.service), the container image
// (Dockerfile, docker-config.yaml), Kubernetes manifests (kubernetes/),
// Prometheus alert rules (prometheus/alerts.yml) and a Grafana dashboard
// (grafana/shaper-dashboard.json); README.md says how to use each. The
// package has no Go API.
package deploy
