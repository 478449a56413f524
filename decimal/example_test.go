package decimal_test

import (
	"errors"
	"fmt"
	"math"

	"github.com/ledgerworks/ledger/decimal"
)

func ExampleParse() {
	price, err := decimal.Parse("19.99", 2)
	fmt.Println(price, price.Units(), err)

	padded, err := decimal.Parse("1.500", 2) // extra zeros are exact
	fmt.Println(padded, err)

	_, err = decimal.Parse("1.505", 2) // Parse never rounds
	fmt.Println(errors.Is(err, decimal.ErrScale))
	// Output:
	// 19.99 1999 <nil>
	// 1.50 <nil>
	// true
}

func ExampleMulRound() {
	quantity := decimal.MustNew(3125, 3) // 3.125 kg
	price := decimal.MustNew(1999, 2)    // 19.99 per kg
	value, err := decimal.MulRound(quantity, price, 2, decimal.HalfEven)
	fmt.Println(value, err) // exactly 62.46875
	// Output: 62.47 <nil>
}

func ExampleMulDiv() {
	// The product does not fit in int64, the quotient does.
	q, err := decimal.MulDiv(math.MaxInt64, 10, 20, decimal.HalfEven)
	fmt.Println(q, err)

	// 12.5 rounds to the even neighbour, or away from zero.
	even, _ := decimal.MulDiv(25, 1, 2, decimal.HalfEven)
	up, _ := decimal.MulDiv(25, 1, 2, decimal.HalfUp)
	fmt.Println(even, up)
	// Output:
	// 4611686018427387904 <nil>
	// 12 13
}

func ExampleDecimal_MulRatio() {
	// A FIFO layer of 3 units worth 100.00; issuing 1 unit takes a third
	// of its value.
	layerValue := decimal.MustNew(10000, 2)
	layerQuantity := decimal.MustNew(3, 0)
	issued := decimal.MustNew(1, 0)
	share, err := layerValue.MulRatio(issued, layerQuantity, decimal.HalfEven)
	fmt.Println(share, err)
	// Output: 33.33 <nil>
}

func ExampleDecimal_Rescale() {
	d := decimal.MustNew(-1235, 3) // -1.235
	for _, mode := range []decimal.RoundingMode{decimal.HalfEven, decimal.HalfUp, decimal.Down} {
		r, _ := d.Rescale(2, mode)
		fmt.Println(mode, r)
	}
	wider, _ := d.Rescale(5, decimal.HalfEven) // exact
	fmt.Println(wider)
	// Output:
	// half-even -1.24
	// half-up -1.24
	// down -1.23
	// -1.23500
}

func ExampleSum() {
	lines := []decimal.Decimal{decimal.MustNew(10000, 2), decimal.MustNew(-7550, 2), decimal.MustNew(-2450, 2)}
	total, err := decimal.Sum(2, lines...)
	fmt.Println(total, err)
	// Output: 0.00 <nil>
}

func ExampleDecimal_MarshalJSON() {
	data, _ := decimal.MustNew(-50, 2).MarshalJSON()
	fmt.Println(string(data))
	back, err := decimal.ParseJSON(data, 2)
	fmt.Println(back, err)
	// Output:
	// "-0.50"
	// -0.50 <nil>
}
