package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the name of the lock a broker holds on its data directory.
const LockFile = ".lock"

// ErrLocked is a data directory another process holds.
var ErrLocked = errors.New("data directory in use")

// Lock is an exclusive hold on a data directory: an flock(2) on
// <dir>/.lock, which holds the holder's pid for the message of the next
// comer. The kernel drops it when the process exits, however it exits, so
// a crash never leaves a stale lock. Two brokers on one directory would
// corrupt each other's logs (and block forever on the embedded etcd's own
// lock), so the second is refused at once.
type Lock struct{ f *os.File }

// Acquire takes dir's lock without waiting: ErrLocked, naming the holder's
// pid, when another process holds it.
func Acquire(dir string) (*Lock, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another strata process (pid %s); stop it, or give this one another --data-dir",
				ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// readHolder is the pid the holder wrote, or "unknown".
func readHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid := strings.TrimSpace(string(buf[:n])); pid != "" {
		if _, err := strconv.Atoi(pid); err == nil {
			return pid
		}
	}
	return "unknown"
}

// Release gives the lock up. The file stays: removing it could let two
// processes lock two different files of the same name.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}
