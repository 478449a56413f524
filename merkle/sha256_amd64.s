//go:build amd64 && !purego

#include "textflag.h"

// The SHA-256 round constants, four to a row: the rounds of one group.
DATA k256<>+0x00(SB)/4, $0x428a2f98
DATA k256<>+0x04(SB)/4, $0x71374491
DATA k256<>+0x08(SB)/4, $0xb5c0fbcf
DATA k256<>+0x0c(SB)/4, $0xe9b5dba5
DATA k256<>+0x10(SB)/4, $0x3956c25b
DATA k256<>+0x14(SB)/4, $0x59f111f1
DATA k256<>+0x18(SB)/4, $0x923f82a4
DATA k256<>+0x1c(SB)/4, $0xab1c5ed5
DATA k256<>+0x20(SB)/4, $0xd807aa98
DATA k256<>+0x24(SB)/4, $0x12835b01
DATA k256<>+0x28(SB)/4, $0x243185be
DATA k256<>+0x2c(SB)/4, $0x550c7dc3
DATA k256<>+0x30(SB)/4, $0x72be5d74
DATA k256<>+0x34(SB)/4, $0x80deb1fe
DATA k256<>+0x38(SB)/4, $0x9bdc06a7
DATA k256<>+0x3c(SB)/4, $0xc19bf174
DATA k256<>+0x40(SB)/4, $0xe49b69c1
DATA k256<>+0x44(SB)/4, $0xefbe4786
DATA k256<>+0x48(SB)/4, $0x0fc19dc6
DATA k256<>+0x4c(SB)/4, $0x240ca1cc
DATA k256<>+0x50(SB)/4, $0x2de92c6f
DATA k256<>+0x54(SB)/4, $0x4a7484aa
DATA k256<>+0x58(SB)/4, $0x5cb0a9dc
DATA k256<>+0x5c(SB)/4, $0x76f988da
DATA k256<>+0x60(SB)/4, $0x983e5152
DATA k256<>+0x64(SB)/4, $0xa831c66d
DATA k256<>+0x68(SB)/4, $0xb00327c8
DATA k256<>+0x6c(SB)/4, $0xbf597fc7
DATA k256<>+0x70(SB)/4, $0xc6e00bf3
DATA k256<>+0x74(SB)/4, $0xd5a79147
DATA k256<>+0x78(SB)/4, $0x06ca6351
DATA k256<>+0x7c(SB)/4, $0x14292967
DATA k256<>+0x80(SB)/4, $0x27b70a85
DATA k256<>+0x84(SB)/4, $0x2e1b2138
DATA k256<>+0x88(SB)/4, $0x4d2c6dfc
DATA k256<>+0x8c(SB)/4, $0x53380d13
DATA k256<>+0x90(SB)/4, $0x650a7354
DATA k256<>+0x94(SB)/4, $0x766a0abb
DATA k256<>+0x98(SB)/4, $0x81c2c92e
DATA k256<>+0x9c(SB)/4, $0x92722c85
DATA k256<>+0xa0(SB)/4, $0xa2bfe8a1
DATA k256<>+0xa4(SB)/4, $0xa81a664b
DATA k256<>+0xa8(SB)/4, $0xc24b8b70
DATA k256<>+0xac(SB)/4, $0xc76c51a3
DATA k256<>+0xb0(SB)/4, $0xd192e819
DATA k256<>+0xb4(SB)/4, $0xd6990624
DATA k256<>+0xb8(SB)/4, $0xf40e3585
DATA k256<>+0xbc(SB)/4, $0x106aa070
DATA k256<>+0xc0(SB)/4, $0x19a4c116
DATA k256<>+0xc4(SB)/4, $0x1e376c08
DATA k256<>+0xc8(SB)/4, $0x2748774c
DATA k256<>+0xcc(SB)/4, $0x34b0bcb5
DATA k256<>+0xd0(SB)/4, $0x391c0cb3
DATA k256<>+0xd4(SB)/4, $0x4ed8aa4a
DATA k256<>+0xd8(SB)/4, $0x5b9cca4f
DATA k256<>+0xdc(SB)/4, $0x682e6ff3
DATA k256<>+0xe0(SB)/4, $0x748f82ee
DATA k256<>+0xe4(SB)/4, $0x78a5636f
DATA k256<>+0xe8(SB)/4, $0x84c87814
DATA k256<>+0xec(SB)/4, $0x8cc70208
DATA k256<>+0xf0(SB)/4, $0x90befffa
DATA k256<>+0xf4(SB)/4, $0xa4506ceb
DATA k256<>+0xf8(SB)/4, $0xbef9a3f7
DATA k256<>+0xfc(SB)/4, $0xc67178f2
GLOBL k256<>(SB), RODATA|NOPTR, $256

// A byte shuffle that turns each big-endian word of a block little-endian.
DATA flipMask<>+0(SB)/8, $0x0405060700010203
DATA flipMask<>+8(SB)/8, $0x0c0d0e0f08090a0b
GLOBL flipMask<>(SB), RODATA|NOPTR, $16

// ROUNDS runs the four rounds of the group whose message words m holds
// (X1 the state's A, B, E, F; X2 its C, D, G, H), two at a time.
#define ROUNDS(m, k) \
	MOVO m, X0 \
	PADDL k(AX), X0 \
	SHA256RNDS2 X0, X1, X2 \
	PSHUFD $0x0e, X0, X0 \
	SHA256RNDS2 X0, X2, X1

// SCHEDULE turns w16 (the words of the group four before) into the next
// group's words, from the three groups after it: w[t] = σ1(w[t-2]) +
// w[t-7] + σ0(w[t-15]) + w[t-16].
#define SCHEDULE(w16, w12, w8, w4) \
	SHA256MSG1 w12, w16 \
	MOVO w4, X7 \
	PALIGNR $4, w8, X7 \
	PADDL X7, w16 \
	SHA256MSG2 w4, w16

// func blocksSHANI(state *[8]uint32, p *byte, n int)
TEXT ·blocksSHANI(SB), NOSPLIT, $0-24
	MOVQ state+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), DX
	LEAQ k256<>(SB), AX
	MOVOU flipMask<>(SB), X8
	MOVOU (DI), X1
	MOVOU 16(DI), X2
	PSHUFD $0xb1, X1, X1
	PSHUFD $0x1b, X2, X2
	MOVO X1, X7
	PALIGNR $8, X2, X1
	PBLENDW $0xf0, X7, X2

loop:
	MOVO X1, X9
	MOVO X2, X10
	MOVOU 0(SI), X3
	PSHUFB X8, X3
	ROUNDS(X3, 0x00)
	MOVOU 16(SI), X4
	PSHUFB X8, X4
	ROUNDS(X4, 0x10)
	MOVOU 32(SI), X5
	PSHUFB X8, X5
	ROUNDS(X5, 0x20)
	MOVOU 48(SI), X6
	PSHUFB X8, X6
	ROUNDS(X6, 0x30)
	SCHEDULE(X3, X4, X5, X6)
	ROUNDS(X3, 0x40)
	SCHEDULE(X4, X5, X6, X3)
	ROUNDS(X4, 0x50)
	SCHEDULE(X5, X6, X3, X4)
	ROUNDS(X5, 0x60)
	SCHEDULE(X6, X3, X4, X5)
	ROUNDS(X6, 0x70)
	SCHEDULE(X3, X4, X5, X6)
	ROUNDS(X3, 0x80)
	SCHEDULE(X4, X5, X6, X3)
	ROUNDS(X4, 0x90)
	SCHEDULE(X5, X6, X3, X4)
	ROUNDS(X5, 0xa0)
	SCHEDULE(X6, X3, X4, X5)
	ROUNDS(X6, 0xb0)
	SCHEDULE(X3, X4, X5, X6)
	ROUNDS(X3, 0xc0)
	SCHEDULE(X4, X5, X6, X3)
	ROUNDS(X4, 0xd0)
	SCHEDULE(X5, X6, X3, X4)
	ROUNDS(X5, 0xe0)
	SCHEDULE(X6, X3, X4, X5)
	ROUNDS(X6, 0xf0)
	PADDL X9, X1
	PADDL X10, X2
	ADDQ $64, SI
	DECQ DX
	JNZ loop

	PSHUFD $0x1b, X1, X1
	PSHUFD $0xb1, X2, X2
	MOVO X1, X7
	PBLENDW $0xf0, X2, X1
	PALIGNR $8, X7, X2
	MOVOU X1, (DI)
	MOVOU X2, 16(DI)
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET
