package hotlog

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// crashTemplate builds a closed log with several sealed segments and
// returns its directory and the log's batches.
func crashTemplate(t *testing.T) (string, [][]byte) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	fillKeyed(t, l, 60)
	old := logBatches(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, old
}

// replaceWithCrash opens a copy of template, cleans its first four sealed
// segments (split at an old base or not) and crashes the replace after
// step (0: no crash). It returns
// the copy's directory, the batches the log holds if the replace took
// effect, and whether the replace finished.
func replaceWithCrash(t *testing.T, template string, step int, atOldBase bool) (dir string, want [][]byte, finished bool) {
	dir = copyDir(t, template)
	l := mustOpen(t, testConfig(t, dir))
	olds, cleaned, want := cleanFirstSplit(t, l, 4, atOldBase)
	l.cleaner.crashAfter = func(s int) bool { return s == step }
	err := l.ReplaceSegments(olds, cleaned)
	if err == nil {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return dir, want, true
	}
	mustBeSimulatedCrash(t, err)
	// After the commit point a failure fences the log: Open must finish.
	if step > 1 {
		if _, err := l.Append(simpleBatch(t, 1, 1, 1), 1); !errors.Is(err, ErrStorage) {
			t.Fatalf("append after a replace failed at step %d: %v", step, err)
		}
	}
	closeWriters(cleaned)
	crash(t, l)
	return dir, want, false
}

// checkOldOrNew reopens dir and requires exactly the old or the new log,
// with no cleaner file left; it returns whether it was the new one.
func checkOldOrNew(t *testing.T, dir string, old, new [][]byte, when string) bool {
	t.Helper()
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	got := logBatches(t, l)
	isOld, isNew := sameBatches(got, old), sameBatches(got, new)
	if !isOld && !isNew {
		t.Fatalf("%s: the log is neither the old (%d batches) nor the new (%d) one: %d batches", when, len(old), len(new), len(got))
	}
	if left := cleanerLeftovers(t, dir); len(left) > 0 {
		t.Fatalf("%s: leftover files %v", when, left)
	}
	return isNew
}

func TestReplaceCrashAtEveryStep(t *testing.T) {
	for _, atOldBase := range []bool{false, true} {
		t.Run("split at old base "+strconv.FormatBool(atOldBase), func(t *testing.T) {
			replaceCrashAtEveryStep(t, atOldBase)
		})
	}
}

func replaceCrashAtEveryStep(t *testing.T, atOldBase bool) {
	template, old := crashTemplate(t)
	for step := 1; ; step++ {
		dir, want, finished := replaceWithCrash(t, template, step, atOldBase)
		if finished {
			if step < 10 {
				t.Fatalf("the replace finished after only %d steps", step-1)
			}
			checkOldOrNew(t, dir, old, want, "finished")
			return
		}
		isNew := checkOldOrNew(t, dir, old, want, "crash at step "+strconv.Itoa(step))
		// Step 1 is before the swap marker, every later one after it.
		if isNew != (step > 1) {
			t.Fatalf("crash at step %d: new log %v", step, isNew)
		}
	}
}

// TestRecoveryCrashAtEveryStep crashes the replace at a few points after
// its commit, then crashes the recovery of it at every step, then opens.
func TestRecoveryCrashAtEveryStep(t *testing.T) {
	template, old := crashTemplate(t)
	for i, first := range []int{2, 17, 30, 36} {
		dir, want, finished := replaceWithCrash(t, template, first, i%2 == 1)
		if finished {
			t.Fatalf("replace finished before step %d", first)
		}
		for step := 1; ; step++ {
			d := copyDir(t, dir)
			if !recoverWithCrash(t, d, step) {
				break
			}
			if !checkOldOrNew(t, d, old, want, "recovery crash") {
				t.Fatalf("replace crashed at %d, recovery at %d: old log back after the commit", first, step)
			}
		}
		if !checkOldOrNew(t, dir, old, want, "plain recovery") {
			t.Fatal("old log after the commit")
		}
	}
}

// recoverWithCrash runs the swap recovery on dir, crashing after step;
// false if it finished first.
func recoverWithCrash(t *testing.T, dir string, step int) bool {
	data, err := readSmallFile(filepath.Join(dir, swapMarkerFile))
	if err != nil {
		t.Fatalf("no swap marker: %v", err)
	}
	m, err := decodeSwapMarker(data)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	stop := func() bool { n++; return n == step }
	err = swapFiles(dir, m, stop)
	if err == nil {
		err = finishSwap(dir, stop)
	}
	if err == nil {
		return false
	}
	mustBeSimulatedCrash(t, err)
	return true
}

func TestSwapMarkerCodec(t *testing.T) {
	m := swapMarker{old: []int64{0, 30, 61}, new: []int64{0, 45}}
	got, err := decodeSwapMarker(encodeSwapMarker(m))
	if err != nil || !slices.Equal(got.old, m.old) || !slices.Equal(got.new, m.new) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "0\n", "1\nold 0\nnew 0\n", "0\nold 0 30\nnew 5\n", "0\nold 30 0\nnew 30\n",
		"0\nold 0\nnew 0\nextra\n", "0\nold -1\nnew -1\n", "0\nold\nnew 0\n", "0\nnew 0\nold 0\n", "0\nold 0 x\nnew 0\n"} {
		if _, err := decodeSwapMarker([]byte(bad)); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
}

// FuzzSwapMarker: decoding never panics, and what decodes re-encodes.
func FuzzSwapMarker(f *testing.F) {
	f.Add(encodeSwapMarker(swapMarker{old: []int64{0, 30}, new: []int64{0}}))
	f.Add([]byte("0\nold 5\nnew 5 9\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeSwapMarker(data)
		if err != nil {
			return
		}
		again, err := decodeSwapMarker(encodeSwapMarker(m))
		if err != nil || !slices.Equal(again.old, m.old) || !slices.Equal(again.new, m.new) {
			t.Fatalf("re-encode of %+v: %+v, %v", m, again, err)
		}
	})
}
