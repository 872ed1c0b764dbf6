package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"time"
)

// How commands print. Tables are for people: sizes and times in human
// units (formatBytes, formatDuration). --json is for programs: exact
// numbers (bytes as integers, times as RFC 3339 or milliseconds), the
// same fields as the table, an array rather than null when empty.

// jsonFlag registers --json on a command that prints a table.
func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print JSON (exact numbers) instead of a table")
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// formatBytes renders a size in binary units: 512 B, 1.5 KiB, 3.2 GiB.
func formatBytes(n int64) string {
	switch {
	case n < 0:
		return "-" + formatBytes(-n)
	case n >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// formatDuration renders a duration at a precision a person reads:
// 850ms, 42s, 3m20s, 5h12m, 3d4h; math.MaxInt64 is "∞".
func formatDuration(d time.Duration) string {
	switch {
	case d == math.MaxInt64:
		return "∞"
	case d < 0:
		return "-" + formatDuration(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return trimZeroUnit(d.Round(time.Second).String())
	case d < 48*time.Hour:
		return trimZeroUnit(d.Round(time.Minute).String())
	}
	days := d / (24 * time.Hour)
	hours := (d % (24 * time.Hour)).Round(time.Hour) / time.Hour
	return fmt.Sprintf("%dd%dh", days, hours)
}

// trimZeroUnit drops Go's trailing zero units: "5h12m0s" → "5h12m".
func trimZeroUnit(s string) string {
	for _, suffix := range []string{"0s", "0m"} {
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix && s[len(s)-len(suffix)-1] >= 'a' {
			s = s[:len(s)-len(suffix)]
		}
	}
	return s
}
