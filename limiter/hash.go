package limiter

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// keyHasher hashes keys for a Keyed: 64 bits, seeded with random words
// drawn when the Keyed is made, so another process (or another Keyed) maps
// the same key elsewhere, and which keys collide (sharing one limit) cannot
// be worked out from outside the process.
//
// Keys of 1 to 16 bytes (tenant IDs, IP addresses, short API key IDs) take
// a multiply-mix of the key's bytes: the construction the Go runtime hashes
// map keys with where the CPU has no AES instructions (memhashFallback in
// runtime/hash64.go, from wyhash), here with this hasher's own random
// words. Other keys take hash/maphash. The lookup waits for the hash, and
// maphash's AES rounds take longer to finish: at 10 000 keys the short-key
// path took 2-4 ns off a ~45 ns decision (BENCHMARKS.md, "the key's hash").
type keyHasher struct {
	seed   maphash.Seed
	k0, k1 uint64
}

func newKeyHasher() keyHasher {
	return keyHasher{seed: maphash.MakeSeed(), k0: rand.Uint64(), k1: rand.Uint64()}
}

// hashMul5 is the runtime's m5, which mixes the key's length into the hash.
const hashMul5 = 0x1d8e4e27c47d124f

// sum returns the 64-bit hash of key.
func (kh *keyHasher) sum(key string) uint64 {
	n := len(key)
	if n == 0 || n > 16 {
		return maphash.String(kh.seed, key)
	}
	b := unsafe.Slice(unsafe.StringData(key), n)
	var x, y uint64 // the key's bytes; the two words overlap below 16 bytes
	switch {
	case n >= 8:
		x, y = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		x, y = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	default:
		x = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	return mix(hashMul5^uint64(n), mix(x^kh.k1, y^kh.k0))
}

// mix is the folded 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
