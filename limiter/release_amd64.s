//go:build gc && amd64 && !race && !purego

#include "textflag.h"

// func storeRelease(addr *atomic.Uint64, v uint64)
TEXT ·storeRelease(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, 0(AX)
	RET
