//go:build !gc || !amd64 || race || purego

package limiter

import "sync/atomic"

// storeRelease stores v at addr (see release_amd64.go): sync/atomic's store,
// a release store on every platform (on arm64 an STLR).
func storeRelease(addr *atomic.Uint64, v uint64) { addr.Store(v) }
