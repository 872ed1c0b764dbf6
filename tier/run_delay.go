package tier

import (
	"os"
	"strconv"
	"strings"
)

// The governor's signal: how long this process's threads waited in the
// kernel's run queues for a CPU (the second field of
// /proc/self/task/*/schedstat, in ns). Its rate over an interval is the
// average number of the broker's threads that were ready to run and did
// not: on the benchmark machine about 0.45 while a hot tail runs alone,
// about 0.95 once a flat-out backfill (its GETs, CRCs, copies, MinIO and
// the client) joins it. The Go scheduler's own latency
// (/sched/latencies:seconds) was tried first and stayed under 1 ms in both
// cases: it does not see the kernel preempting the broker's threads.

// maxTasks bounds the threads read per sample (a Go process runs a few
// dozen; the cap only guards against a pathological count).
const maxTasks = 4096

// runDelaySampler reads the process's cumulative run-queue wait.
type runDelaySampler struct {
	dir string // /proc/self/task
}

// newRunDelaySampler returns a sampler, or false where the kernel does not
// expose schedstat (not Linux, or no procfs).
func newRunDelaySampler() (*runDelaySampler, bool) {
	s := &runDelaySampler{dir: "/proc/self/task"}
	_, err := s.total()
	return s, err == nil
}

// total is the sum of every thread's run-queue wait so far, in ns. Threads
// that exit take their share with them, so a caller works with differences
// and clamps them at zero.
func (s *runDelaySampler) total() (int64, error) {
	f, err := os.Open(s.dir)
	if err != nil {
		return 0, err
	}
	names, err := f.Readdirnames(maxTasks)
	f.Close()
	if err != nil && len(names) == 0 {
		return 0, err
	}
	var sum int64
	for _, n := range names {
		b, err := os.ReadFile(s.dir + "/" + n + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		sum += parseRunDelay(string(b))
	}
	return sum, nil
}

// parseRunDelay is the second field of a schedstat line ("run wait
// timeslices"), or 0 if it is malformed.
func parseRunDelay(line string) int64 {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return 0
	}
	v, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}
