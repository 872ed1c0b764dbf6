package hotlog

// The swap of cleaned segments and its recovery (doc.go, "Compaction"):
// the swap marker that commits a replacement, the idempotent roll-forward
// that both ReplaceSegments and Open run, and the clean-up of files left
// by an uncommitted one.

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// swapMarkerFile is the commit point of a ReplaceSegments. Part of the
// on-disk format; never change.
const swapMarkerFile = "cleaner-swap"

// swapMarker is the content of the swap marker: the replaced segments'
// bases and the new ones', both strictly increasing, new[0] == old[0].
type swapMarker struct {
	old, new []int64
}

func encodeSwapMarker(m swapMarker) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n", checkpointVersion)
	for _, line := range []struct {
		tag   string
		bases []int64
	}{{"old", m.old}, {"new", m.new}} {
		b.WriteString(line.tag)
		for _, base := range line.bases {
			fmt.Fprintf(&b, " %d", base)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// decodeSwapMarker parses and checks a marker (bounded by readSmallFile).
func decodeSwapMarker(data []byte) (swapMarker, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[0] != strconv.Itoa(checkpointVersion) {
		return swapMarker{}, fmt.Errorf("hotlog: swap marker: bad header or %d lines", len(lines))
	}
	var m swapMarker
	for i, tag := range []string{"old", "new"} {
		f := strings.Fields(lines[i+1])
		if len(f) < 2 || f[0] != tag {
			return swapMarker{}, fmt.Errorf("hotlog: swap marker: bad %q line", tag)
		}
		bases := make([]int64, 0, len(f)-1)
		for _, s := range f[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 || v > maxOffset || (len(bases) > 0 && v <= bases[len(bases)-1]) {
				return swapMarker{}, fmt.Errorf("hotlog: swap marker: bad base %q", s)
			}
			bases = append(bases, v)
		}
		if tag == "old" {
			m.old = bases
		} else {
			m.new = bases
		}
	}
	if m.new[0] != m.old[0] {
		return swapMarker{}, fmt.Errorf("hotlog: swap marker: new segments start at %d, old at %d", m.new[0], m.old[0])
	}
	return m, nil
}

// swapFiles moves the committed new segments of m into place: every
// .cleaned file becomes .swap, every old segment file becomes .deleted,
// every .swap file takes its final name (the .log last), then the
// directory is fsynced. Each step is a rename that checks what is there
// first, so a crash anywhere is finished by running it again. The rule
// that makes it idempotent: while <base><suffix>.swap exists, the file at
// <base><suffix> (if any) is the old segment's.
// stop, when not nil, is consulted after each step (crash tests).
func swapFiles(dir string, m swapMarker, stop func() bool) error {
	isNew := map[int64]bool{}
	for _, b := range m.new {
		isNew[b] = true
	}
	steps := []func() (bool, error){
		func() (bool, error) { return renameEach(dir, m.new, cleanedSuffix, swapSuffix, stop) },
		func() (bool, error) { return retireOld(dir, m.old, isNew, stop) },
		func() (bool, error) { return renameEach(dir, m.new, swapSuffix, "", stop) },
	}
	for _, step := range steps {
		if crashed, err := step(); err != nil || crashed {
			return crashErr(crashed, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return crashErr(stopAt(stop), nil)
}

// renameEach renames <base><suffix><from> to <base><suffix><to> for every
// base and segment suffix where the source exists.
func renameEach(dir string, bases []int64, from, to string, stop func() bool) (bool, error) {
	for _, base := range bases {
		for _, sfx := range segmentSuffixes {
			src := segmentFileName(dir, base, sfx+from)
			if ok, err := exists(src); err != nil || !ok {
				if err != nil {
					return false, err
				}
				continue
			}
			if err := os.Rename(src, segmentFileName(dir, base, sfx+to)); err != nil {
				return false, err
			}
			if stopAt(stop) {
				return true, nil
			}
		}
	}
	return false, nil
}

// retireOld renames each old segment file to .deleted, unless it is a new
// segment's file already in place (same base, no .swap left for it).
func retireOld(dir string, old []int64, isNew map[int64]bool, stop func() bool) (bool, error) {
	for _, base := range old {
		for _, sfx := range segmentSuffixes {
			path := segmentFileName(dir, base, sfx)
			old, err := isOldFile(path, isNew[base])
			if err != nil {
				return false, err
			}
			if !old {
				continue
			}
			if err := os.Rename(path, path+deletedSuffix); err != nil {
				return false, err
			}
			if stopAt(stop) {
				return true, nil
			}
		}
	}
	return false, nil
}

// isOldFile reports whether path exists and is an old segment's file: a
// name no new segment has, or one whose new file is still .swap.
func isOldFile(path string, newBase bool) (bool, error) {
	ok, err := exists(path)
	if err != nil || !ok || !newBase {
		return ok, err
	}
	return exists(path + swapSuffix)
}

// finishSwap unlinks the .deleted files, then removes the marker: only
// after swapFiles' renames are durable (its directory fsync), since
// without the marker recovery discards .swap files.
func finishSwap(dir string, stop func() bool) error {
	names, err := filesWithSuffix(dir, deletedSuffix)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if stopAt(stop) {
			return errSimulatedCrash
		}
	}
	if err := os.Remove(filepath.Join(dir, swapMarkerFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if stopAt(stop) {
		return errSimulatedCrash
	}
	return syncDir(dir)
}

// recoverSwap runs at Open before the segments are listed. With a swap
// marker the interrupted replacement is completed; then every leftover
// .cleaned (an uncommitted replacement), .swap (none can remain without a
// marker) and .deleted (a finished one) file is removed.
func recoverSwap(dir string, logger *slog.Logger) error {
	data, err := readSmallFile(filepath.Join(dir, swapMarkerFile))
	switch {
	case err == nil:
		m, derr := decodeSwapMarker(data)
		if derr != nil {
			// Written atomically, so this is damage: refuse to guess which
			// of the old and new files are the log.
			return derr
		}
		if err := checkSwapComplete(dir, m); err != nil {
			return err
		}
		logger.Warn("hotlog: completing an interrupted segment swap", "dir", dir, "old", m.old, "new", m.new)
		if err := swapFiles(dir, m, nil); err != nil {
			return err
		}
		if err := finishSwap(dir, nil); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return removeCleanerLeftovers(dir, logger)
}

// checkSwapComplete requires every new segment's .log to exist under one
// of its names before anything is renamed.
func checkSwapComplete(dir string, m swapMarker) error {
	for _, base := range m.new {
		path := segmentFileName(dir, base, logSuffix)
		found := false
		for _, p := range []string{path + cleanedSuffix, path + swapSuffix, path} {
			ok, err := exists(p)
			if err != nil {
				return err
			}
			found = found || ok
		}
		if !found {
			return fmt.Errorf("%w: swap marker names segment %d, whose files are missing", ErrCorruptBatch, base)
		}
	}
	return nil
}

// removeCleanerLeftovers deletes .cleaned, .swap and .deleted files (no
// replacement is in progress at Open) and fsyncs the directory if any went.
func removeCleanerLeftovers(dir string, logger *slog.Logger) error {
	removed := false
	for _, sfx := range []string{cleanedSuffix, swapSuffix, deletedSuffix} {
		names, err := filesWithSuffix(dir, sfx)
		if err != nil {
			return err
		}
		for _, name := range names {
			if sfx == swapSuffix {
				logger.Warn("hotlog: removing a swap file without a swap marker", "dir", dir, "file", name)
			}
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			removed = true
		}
	}
	if !removed {
		return nil
	}
	return syncDir(dir)
}

// filesWithSuffix lists the names in dir ending in suffix, sorted.
func filesWithSuffix(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// exists reports whether path exists; an error other than "not there"
// is returned, never taken for absence.
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func stopAt(stop func() bool) bool { return stop != nil && stop() }

func crashErr(crashed bool, err error) error {
	if crashed {
		return errSimulatedCrash
	}
	return err
}
