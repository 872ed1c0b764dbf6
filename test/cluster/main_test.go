package cluster

import (
	"bufio"
	"net"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.Main(m)) }

// TestProxyCutHeal: a proxy forwards, Cut resets open connections and holds
// new ones silent, Heal forwards again.
func TestProxyCutHeal(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = bufio.NewReader(c).WriteTo(c) }()
		}
	}()
	p, err := NewProxy("test", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	roundTrip := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_, err := bufio.NewReader(c).ReadString('\n')
		return err
	}
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	before := dial()
	if err := roundTrip(before); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(before); err == nil {
		t.Fatal("an open connection still works after Cut")
	}
	held := dial()
	if err := roundTrip(held); err == nil {
		t.Fatal("a new connection works while cut")
	}
	p.Heal()
	if err := roundTrip(dial()); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

// TestWorkloadNoFaults checks the harness itself: a workload over
// unreplicated partitions spread on three brokers, with no fault, yields a
// clean history with every acknowledged record read back.
func TestWorkloadNoFaults(t *testing.T) {
	defer timed(t, "TestWorkloadNoFaults")()
	c := Start(t, Config{})
	const topic = "nofaults"
	c.CreateTopic(topic, 3, 1, nil)
	w := c.StartWorkload(WorkloadConfig{Topic: topic, Partitions: 3, Consumers: 2, Rate: 300})
	w.WaitAcked(600, progressTimeout)
	rep := finishClean(t, w, 600)
	if rep.Stats.Observations < 2*rep.Stats.Acked {
		t.Errorf("two consumers made %d observations of %d acknowledged records", rep.Stats.Observations, rep.Stats.Acked)
	}
}
