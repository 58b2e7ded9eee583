package billing

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Amount is money in units of 10⁻⁸ of the currency (for CNY, 10⁻⁸ yuan). Money is never a float:
// every amount is an integer count of these units.
//
// Why 10⁻⁸: a GPU core-second at 0.5 CNY per core-hour is 0.5/3600 CNY = 13 888.9 units, so the
// cost of any run is exact to within half a unit (0.000000005 CNY) after the one rounding rule
// (see CostOf), and the sum of any number of runs never drifts from the ledger.
type Amount int64

// Scale is how many units make one currency unit.
const Scale = 100_000_000

// decimals is how many places ParseAmount accepts and String prints.
const decimals = 8

// ParseAmount reads a decimal string ("10", "10.5", "0.00000001"): ASCII digits with at most 8
// decimals and nothing else: no sign, no exponent, no spaces or other text around it. It is the
// one parser of amounts (top-ups, credit grants, spending caps, prices in the settings), and
// exact on purpose: " 1" or "1\n" is a mistake somewhere, not one yuan.
func ParseAmount(s string) (Amount, error) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || (hasFrac && frac == "") || len(frac) > decimals || len(whole) > 10 {
		return 0, fmt.Errorf("amount %q: want only digits, with at most %d decimals (no sign, exponent or spaces)", s, decimals)
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("amount %q: want only digits, with at most %d decimals (no sign, exponent or spaces)", s, decimals)
		}
	}
	frac += strings.Repeat("0", decimals-len(frac))
	w, _ := strconv.ParseInt(whole, 10, 64) // digits only, at most 10 of them: no error possible
	f, _ := strconv.ParseInt(frac, 10, 64)
	return Amount(w*Scale + f), nil
}

// String prints all 8 decimals, exactly.
func (a Amount) String() string {
	sign := ""
	if a < 0 {
		sign, a = "-", -a
	}
	return fmt.Sprintf("%s%d.%08d", sign, int64(a)/Scale, int64(a)%Scale)
}

// Display prints 4 decimals, rounded half away from zero: what the API and statements show.
func (a Amount) Display() string {
	sign := ""
	if a < 0 {
		sign, a = "-", -a
	}
	const step = Scale / 10_000
	r := (int64(a) + step/2) / step
	return fmt.Sprintf("%s%d.%04d", sign, r/10_000, r%10_000)
}

// CostOf is the one rounding rule: the price of coreSeconds at pricePerCoreHour, rounded half up
// to a whole unit. It is computed in arbitrary precision, so no intermediate product overflows.
func CostOf(coreSeconds int64, pricePerCoreHour Amount) Amount {
	n := new(big.Int).Mul(big.NewInt(coreSeconds), big.NewInt(int64(pricePerCoreHour)))
	n.Add(n, big.NewInt(1800)) // + half of 3600: round half up
	n.Quo(n, big.NewInt(3600))
	return Amount(n.Int64())
}
