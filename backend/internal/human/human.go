// Package human writes quantities the way people read them in messages and the dashboard:
// "24 hours", "5 minutes", "14 days", never Go's "24h0m0s".
package human

import (
	"strconv"
	"time"
)

// Duration writes d in its largest whole unit: days (from 2 days), hours, minutes or seconds,
// rounded to the second when no unit divides it.
func Duration(d time.Duration) string {
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return strconv.FormatInt(n, 10) + " " + unit + "s"
	}
	const day = 24 * time.Hour
	switch {
	case d >= 2*day && d%day == 0:
		return plural(int64(d/day), "day")
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	}
	return plural(int64(d.Round(time.Second)/time.Second), "second")
}
