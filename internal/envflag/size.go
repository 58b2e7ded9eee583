package envflag

import (
	"fmt"
	"strconv"
	"strings"
)

// Size defines a byte-count flag: a whole number of bytes, or a whole number with a unit — B, KB,
// MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), case-insensitive, with an
// optional space: "512MiB", "20 GiB", "1500MB". 0 is allowed (callers say what it means).
func (s *Set) Size(p *int64, name, env string, def int64, usage string) {
	*p = def
	s.fs.Var((*sizeValue)(p), name, usage)
	s.register(name, env)
}

type sizeValue int64

func (v *sizeValue) String() string { return FormatSize(int64(*v)) }

func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"b", 1},
}

// ParseSize reads a byte count as Size flags accept it.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (a whole byte count like 20GiB, 512MiB or 1000000)", s)
	}
	return n * mult, nil
}

// FormatSize writes n in the largest binary unit that divides it exactly ("20GiB", "1500B").
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// HumanSize writes n for a person, in the largest binary unit it reaches, one decimal:
// "120.5 MiB", "812 B".
func HumanSize(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}
