package decimal_test

import (
	"math"
	"math/big"
	"testing"

	"github.com/ledgerworks/ledger/decimal"
)

// Each benchmark has a "decimal" case and a "big" baseline doing the same
// computation with math/big in the same run, so their ratio is visible:
//
//	go test -run='^$' -bench=. -benchmem ./decimal
//
// The baselines reuse their big values across iterations, the fastest
// honest way to use math/big, so the ratio is not inflated by allocation.

// mulDivInputs mixes everyday amounts with products far beyond int64.
var mulDivInputs = [...][3]int64{
	{1_234_567, 19_999, 1_000},                           // quantity × price, rescaled
	{-250_000, 3, 7},                                     // a third of a layer, negative
	{math.MaxInt64 / 3, 1_000_003, 2_000_001},            // 126-bit product
	{9_000_000_000_000_000, -777_777_777, 1_000_000_000}, // wide, negative
}

var sinkInt64 int64

func BenchmarkMulDiv(b *testing.B) {
	b.Run("decimal", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			in := &mulDivInputs[i%len(mulDivInputs)]
			q, err := decimal.MulDiv(in[0], in[1], in[2], decimal.HalfEven)
			if err != nil {
				b.Fatal(err)
			}
			sinkInt64 = q
		}
	})
	b.Run("big", func(b *testing.B) {
		var x, y, c, q, r big.Int
		for i := 0; b.Loop(); i++ {
			in := &mulDivInputs[i%len(mulDivInputs)]
			x.SetInt64(in[0])
			y.SetInt64(in[1])
			c.SetInt64(in[2])
			x.Mul(&x, &y)
			q.QuoRem(&x, &c, &r)
			// Half-even: compare 2|r| with |c|.
			r.Abs(&r)
			r.Lsh(&r, 1)
			c.Abs(&c)
			if half := r.Cmp(&c); half > 0 || half == 0 && q.Bit(0) == 1 {
				if x.Sign()*int(in[2]>>63|1) < 0 {
					q.Sub(&q, bigOne)
				} else {
					q.Add(&q, bigOne)
				}
			}
			if !q.IsInt64() {
				b.Fatal("overflow")
			}
			sinkInt64 = q.Int64()
		}
	})
}

// mulRoundInputs multiply at scales whose exact product has up to 36 places.
var mulRoundInputs = [...][2]decimal.Decimal{
	{decimal.MustNew(3125, 3), decimal.MustNew(1999, 2)},
	{decimal.MustNew(-123_456_789, 6), decimal.MustNew(987_654_321, 4)},
	{decimal.MustNew(math.MaxInt64, 18), decimal.MustNew(math.MinInt64+1, 18)},
}

func BenchmarkMulRound(b *testing.B) {
	b.Run("decimal", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			in := &mulRoundInputs[i%len(mulRoundInputs)]
			d, err := decimal.MulRound(in[0], in[1], 2, decimal.HalfEven)
			if err != nil {
				b.Fatal(err)
			}
			sinkInt64 = d.Units()
		}
	})
	b.Run("big", func(b *testing.B) {
		var powers [2*decimal.ScaleMax + 1]big.Int
		for i := range powers {
			powers[i].Exp(bigTen, big.NewInt(int64(i)), nil)
		}
		var x, y, q, r big.Int
		for i := 0; b.Loop(); i++ {
			in := &mulRoundInputs[i%len(mulRoundInputs)]
			x.SetInt64(in[0].Units())
			y.SetInt64(in[1].Units())
			x.Mul(&x, &y)
			divisor := &powers[int(in[0].Scale()+in[1].Scale())-2]
			q.QuoRem(&x, divisor, &r)
			r.Abs(&r)
			r.Lsh(&r, 1)
			if half := r.Cmp(divisor); half > 0 || half == 0 && q.Bit(0) == 1 {
				if x.Sign() < 0 {
					q.Sub(&q, bigOne)
				} else {
					q.Add(&q, bigOne)
				}
			}
			if !q.IsInt64() {
				b.Fatal("overflow")
			}
			sinkInt64 = q.Int64()
		}
	})
}

var parseInputs = [...]string{"12.50", "-1234567.89", "0.05", "92233720368547758.07"}

func BenchmarkParse(b *testing.B) {
	b.Run("decimal", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			d, err := decimal.Parse(parseInputs[i%len(parseInputs)], 2)
			if err != nil {
				b.Fatal(err)
			}
			sinkInt64 = d.Units()
		}
	})
	b.Run("big", func(b *testing.B) {
		scale := new(big.Rat).SetInt64(100)
		var value big.Rat
		for i := 0; b.Loop(); i++ {
			if _, ok := value.SetString(parseInputs[i%len(parseInputs)]); !ok {
				b.Fatal("syntax")
			}
			value.Mul(&value, scale)
			if !value.IsInt() || !value.Num().IsInt64() {
				b.Fatal("scale or overflow")
			}
			sinkInt64 = value.Num().Int64()
		}
	})
}

var sinkString string

func BenchmarkString(b *testing.B) {
	values := [...]decimal.Decimal{decimal.MustNew(1250, 2), decimal.MustNew(-123456789, 2), decimal.MustNew(math.MinInt64, 2)}
	b.Run("decimal", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sinkString = values[i%len(values)].String()
		}
	})
	b.Run("big", func(b *testing.B) {
		var value big.Rat
		denominator := big.NewInt(100)
		var numerator big.Int
		for i := 0; b.Loop(); i++ {
			value.SetFrac(numerator.SetInt64(values[i%len(values)].Units()), denominator)
			sinkString = value.FloatString(2)
		}
	})
}
