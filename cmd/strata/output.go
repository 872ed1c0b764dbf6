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

// progressEvery is how often a progress line is redrawn.
const progressEvery = 250 * time.Millisecond

// progressLine draws one line of progress (records, bytes, rate, ETA) on
// a terminal's stderr, redrawn in place; in a pipe or a file it prints
// nothing, so logs and scripts see only results.
type progressLine struct {
	w     io.Writer // nil: not a terminal
	start time.Time
}

func newProgressLine(stderr io.Writer) *progressLine {
	p := &progressLine{start: time.Now()}
	if isTerminal(stderr) {
		p.w = stderr
	}
	return p
}

// render is the line for done of total records (total 0: unknown) and
// bytes after elapsed.
func renderProgress(done, total, bytes int64, elapsed time.Duration) string {
	line := fmt.Sprintf("%d", done)
	if total > 0 {
		line += fmt.Sprintf("/%d", total)
	}
	line += fmt.Sprintf(" records  %s", formatBytes(bytes))
	if secs := elapsed.Seconds(); secs > 0 {
		line += fmt.Sprintf("  %s/s  %.0f records/s", formatBytes(int64(float64(bytes)/secs)), float64(done)/secs)
	}
	if total > 0 && done > 0 && done < total {
		eta := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
		line += "  ETA " + formatDuration(eta)
	}
	return line
}

// watch redraws the line from read every progressEvery until the returned
// stop is called, which erases it.
func (p *progressLine) watch(read func() (done, total, bytes int64)) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				fmt.Fprint(p.w, "\r\x1b[K")
				return
			case <-tick.C:
				done, total, bytes := read()
				fmt.Fprintf(p.w, "\r\x1b[K%s", renderProgress(done, total, bytes, time.Since(p.start)))
			}
		}
	}()
	return func() { close(quit); <-finished }
}
