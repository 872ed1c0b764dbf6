package datadir

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-log/strata/metadata"
)

// MetadataFile names the file of a partition directory that holds its
// topic id. Part of the on-disk format, never change.
const MetadataFile = "partition.metadata"

// Layout is one broker's data directory.
type Layout struct {
	// Root is the data directory.
	Root string
	// ValidTopic reports whether name is a valid topic name; only
	// directories named <valid topic>-<partition> are partition
	// directories.
	ValidTopic func(name string) bool
}

// Name is the directory name of a partition: <topic>-<index>.
func Name(topic string, index int32) string { return topic + "-" + strconv.Itoa(int(index)) }

// PartitionDir is the directory of a local partition's log.
func (l Layout) PartitionDir(topic string, index int32) string {
	return filepath.Join(l.Root, Name(topic, index))
}

// Metadata is the content of partition.metadata for topic id.
func Metadata(id metadata.TopicID) string {
	return "version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n"
}

// Claim makes dir belong to topic id: a directory left by an older topic
// of the same name is emptied first.
func Claim(dir string, id metadata.TopicID) error {
	file := filepath.Join(dir, MetadataFile)
	want := Metadata(id)
	if got, err := os.ReadFile(file); err == nil {
		if string(got) == want {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("datadir: removing stale %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("datadir: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(want), 0o644); err != nil {
		return fmt.Errorf("datadir: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("datadir: %w", err)
	}
	return nil
}

// RemoveStray deletes the partition directories of Root that want (by
// directory name, the topic id that may keep it) does not keep.
func (l Layout) RemoveStray(want map[string]metadata.TopicID, log *slog.Logger) {
	entries, err := os.ReadDir(l.Root)
	if err != nil {
		log.Warn("listing data dir", "err", err)
		return
	}
	for _, ent := range entries {
		if !ent.IsDir() || !l.IsPartitionDir(ent.Name()) {
			continue
		}
		dir := filepath.Join(l.Root, ent.Name())
		got, err := os.ReadFile(filepath.Join(dir, MetadataFile))
		if err != nil {
			continue // not ours to judge
		}
		if id, ok := want[ent.Name()]; ok && string(got) == Metadata(id) {
			continue
		}
		log.Info("deleting partition directory unknown to metadata", "dir", dir)
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("deleting stray directory", "dir", dir, "err", err)
		}
	}
}

// IsPartitionDir reports whether name has a partition directory's form,
// <valid topic name>-<partition>.
func (l Layout) IsPartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return false
	}
	n, err := strconv.Atoi(name[i+1:])
	return err == nil && n >= 0 && l.ValidTopic(name[:i])
}

// Usage is the size of the file system holding dir and the bytes free for
// unprivileged use, as Kafka's DescribeLogDirs reports them.
func Usage(dir string) (total, usable int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1, fmt.Errorf("datadir: statfs %s: %w", dir, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}
