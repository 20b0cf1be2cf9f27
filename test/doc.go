// Package test holds black-box integration tests: a real NATS server
// in-process on a random port, real HTTP downstreams (httptest), and the
// whole daemon, driven only through NATS and the admin HTTP API.
package test
