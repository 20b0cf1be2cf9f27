package limiter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// keyFamilies are sets of keys as they come in practice, over every length
// the short-key path handles and past it (maphash).
func keyFamilies() map[string][]string {
	fam := map[string][]string{}
	for i := range 1 << 16 {
		fam["tenant hex"] = append(fam["tenant hex"], fmt.Sprintf("tenant-%08x", i)) // 15 bytes
		fam["decimal"] = append(fam["decimal"], strconv.Itoa(i))                     // 1–5 bytes
		fam["ipv4"] = append(fam["ipv4"], fmt.Sprintf("10.%d.%d.%d", i>>12, i>>6&63, i&63))
		fam["16 bytes"] = append(fam["16 bytes"], fmt.Sprintf("key-%012d", i))
		fam["long"] = append(fam["long"], fmt.Sprintf("customer-account-%d", i))
	}
	// Every string of 1–3 bytes over a small alphabet, and 4–16-byte strings
	// differing in one byte.
	shorter := []string{""}
	for range 3 {
		var longer []string
		for _, s := range shorter {
			for _, c := range "ab0-" {
				longer = append(longer, s+string(c))
			}
		}
		fam["tiny"] = append(fam["tiny"], longer...)
		shorter = longer
	}
	for n := 4; n <= 16; n++ {
		for pos := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("k", n))
				b[pos] = byte(c)
				fam["one byte"] = append(fam["one byte"], string(b))
			}
		}
	}
	return fam
}

// TestKeyHasherSpreads checks the stored hashes of realistic key families:
// no two distinct keys share one (among these ~360 000 keys a collision of
// random 62-bit values has probability ~1.4e-8), and each family large
// enough to tell spreads evenly over the 64 shards (the top six bits) and
// over a table's home slots. A hash that ignored some of a key's bytes, or mixed them poorly,
// fails one or the other.
func TestKeyHasherSpreads(t *testing.T) {
	kh := newKeyHasher()
	seen := map[uint64]string{}
	for name, keys := range keyFamilies() {
		uniq := map[string]bool{}
		var shards [64]int
		var homes [256]int
		for _, key := range keys {
			if uniq[key] {
				continue
			}
			uniq[key] = true
			h := keyHash(kh.sum(key))
			if other, dup := seen[h]; dup && other != key { // families may share a key
				t.Fatalf("%s: keys %q and %q both hash to %#x", name, key, other, h)
			}
			seen[h] = key
			shards[h>>58]++
			homes[home(h, len(homes))]++
		}
		checkEven(t, name+" shards", shards[:], len(uniq))
		checkEven(t, name+" home slots", homes[:], len(uniq))
	}
}

// checkEven fails if a bucket of counts is more than 6 standard deviations
// (of a binomial count) from the mean: over the ~2 000 buckets checked an
// even hash fails that about once in 10^5 runs, a hash that clusters keys
// at once. Below 32 keys per bucket the normal approximation behind that
// does not hold (the 84 tiny keys would fail it one run in ten), and such
// families are only checked for distinct hashes.
func checkEven(t *testing.T, what string, counts []int, total int) {
	t.Helper()
	p := 1 / float64(len(counts))
	mean := float64(total) * p
	if mean < 32 {
		return
	}
	sd := math.Sqrt(mean * (1 - p))
	for i, c := range counts {
		if d := float64(c) - mean; d > 6*sd || d < -6*sd {
			t.Fatalf("%s: bucket %d of %d holds %d of %d keys, expected %.0f ± %.0f", what, i, len(counts), c, total, mean, 6*sd)
		}
	}
}

// TestKeyHasherEveryByteCounts flips each bit of keys of every length up
// to 20 bytes and wants a different hash each time, and different hashes
// for a key and its prefixes (the length is hashed too).
func TestKeyHasherEveryByteCounts(t *testing.T) {
	kh := newKeyHasher()
	for n := 1; n <= 20; n++ {
		key := []byte("abcdefghijklmnopqrst"[:n])
		h := kh.sum(string(key))
		for pos := range n {
			for bit := range 8 {
				key[pos] ^= 1 << bit
				if kh.sum(string(key)) == h {
					t.Fatalf("len %d: flipping bit %d of byte %d leaves the hash %#x", n, bit, pos, h)
				}
				key[pos] ^= 1 << bit
			}
		}
		if kh.sum(string(key)) != h {
			t.Fatalf("len %d: the same key hashed twice gave two values", n)
		}
	}
	runs := []string{"a", "aa", "aaa", "aaaa", "aaaaaaa", "aaaaaaaa", strings.Repeat("a", 16)}
	for _, k := range runs {
		for _, p := range runs {
			if len(p) < len(k) && kh.sum(p) == kh.sum(k) {
				t.Fatalf("%q and its prefix %q hash alike", k, p)
			}
		}
	}
}

// TestKeyHasherSeeded: two Keyed limiters map the same key to different
// hashes (their random words differ), so which keys collide cannot be
// learned from one and used on another.
func TestKeyHasherSeeded(t *testing.T) {
	a, b := newKeyHasher(), newKeyHasher()
	for _, key := range []string{"x", "acme", "10.0.0.1", "tenant-0000002a", strings.Repeat("z", 40)} {
		if a.sum(key) == b.sum(key) {
			t.Errorf("%q: two hashers gave the same hash %#x", key, a.sum(key))
		}
	}
}
