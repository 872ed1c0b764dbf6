package hotlog

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File names inside a partition directory. Part of the on-disk format; never change.
const (
	logSuffix              = ".log"
	indexSuffix            = ".index"
	timeIndexSuffix        = ".timeindex"
	tmpSuffix              = ".tmp"
	leaderEpochFile        = "leader-epoch-checkpoint"
	recoveryPointFile      = "recovery-point-checkpoint"
	logStartOffsetFile     = "log-start-offset-checkpoint"
	cleanShutdownFile      = "clean-shutdown"
	checkpointVersion      = 0
	maxCheckpointFileBytes = 16 << 20 // bound before reading a checkpoint
	maxEpochEntries        = 1 << 20
)

// segmentFileName is <baseOffset:020><suffix>.
func segmentFileName(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// writeFileAtomic replaces dir/name with data: temp file, fsync, rename, fsync dir.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// readSmallFile reads a checkpoint, refusing anything implausibly large.
func readSmallFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCheckpointFileBytes {
		return nil, fmt.Errorf("hotlog: %s: %d bytes is too large for a checkpoint", path, st.Size())
	}
	return os.ReadFile(path)
}

// writeOffsetCheckpoint writes "version\noffset\n".
func writeOffsetCheckpoint(dir, name string, offset int64) error {
	return writeFileAtomic(dir, name, fmt.Appendf(nil, "%d\n%d\n", checkpointVersion, offset))
}

// readOffsetCheckpoint returns the offset, or ok=false if the file is missing or malformed.
func readOffsetCheckpoint(dir, name string) (int64, bool) {
	data, err := readSmallFile(filepath.Join(dir, name))
	if err != nil {
		return 0, false
	}
	lines := strings.Fields(string(data))
	if len(lines) != 2 || lines[0] != strconv.Itoa(checkpointVersion) {
		return 0, false
	}
	v, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// epochEntry says the leader of Epoch appended from StartOffset on.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

func encodeEpochCheckpoint(entries []epochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// decodeEpochCheckpoint parses Kafka's leader-epoch-checkpoint text format,
// requiring entries that increase strictly in both columns.
func decodeEpochCheckpoint(data []byte) ([]epochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	if v, ok := next(); !ok || v != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("hotlog: epoch checkpoint: bad version %q", v)
	}
	c, ok := next()
	count, err := strconv.Atoi(c)
	if !ok || err != nil || count < 0 || count > maxEpochEntries {
		return nil, fmt.Errorf("hotlog: epoch checkpoint: bad count %q", c)
	}
	entries := make([]epochEntry, 0, min(count, 1024))
	for i := 0; i < count; i++ {
		line, ok := next()
		f := strings.Fields(line)
		if !ok || len(f) != 2 {
			return nil, fmt.Errorf("hotlog: epoch checkpoint: bad entry %d %q", i, line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("hotlog: epoch checkpoint: bad entry %q", line)
		}
		e := epochEntry{Epoch: int32(epoch), StartOffset: start}
		if n := len(entries); n > 0 && (e.Epoch <= entries[n-1].Epoch || e.StartOffset <= entries[n-1].StartOffset) {
			return nil, fmt.Errorf("hotlog: epoch checkpoint: entry %q does not increase", line)
		}
		entries = append(entries, e)
	}
	return entries, nil
}
