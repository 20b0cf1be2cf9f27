//go:build shaperd_pprof

package main

import (
	"net"
	"net/http"
	_ "net/http/pprof" // the profiling build's only purpose
	"os"
	"runtime"
)

// A shaperd built with -tags shaperd_pprof (the intake bench builds one so
// when asked for profiles) serves net/http/pprof on the address in
// SHAPERD_PPROF_LISTEN, with block and mutex profiling on. The release
// binary has none of this.
func init() {
	addr := os.Getenv("SHAPERD_PPROF_LISTEN")
	if addr == "" {
		return
	}
	runtime.SetBlockProfileRate(10000) // one blocking event per 10 µs blocked
	runtime.SetMutexProfileFraction(10)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic("shaperd_pprof: " + err.Error())
	}
	go func() { _ = http.Serve(ln, nil) }()
}
