//go:build gc && amd64 && !race && !purego

package limiter

import "sync/atomic"

// storeRelease stores v at addr: a plain MOV. On amd64 every store is a
// release store (the processor does not reorder a store ahead of earlier
// loads or stores), which is all a lock's unlock needs; sync/atomic's
// Store is an XCHG, a locked instruction that drains the store
// buffer and costs a decision ~20 cycles more. It must be the only write
// to *addr while it runs (the slot lock's holder unlocking). Race-detector
// builds use sync/atomic instead (release_other.go), so the detector sees
// the unlock as the synchronisation it is; so do gccgo and the purego tag.
//
//go:noescape
func storeRelease(addr *atomic.Uint64, v uint64)
