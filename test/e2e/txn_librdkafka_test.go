package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// rdkTxnProducer is a librdkafka transactional producer. The system has
// librdkafka's shared library but not its headers, so the few declarations
// it needs are written here from librdkafka's public API (rdkafka.h).
//
// Usage: rdk-txn <brokers> <topic> <transactional.id> (commit|abort):<tag>:<n> ...
// Each step is one transaction of n records "<tag>-%03d" to partition 0,
// flushed (acknowledged) before it is committed or aborted.
const rdkTxnProducer = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_error_s rd_kafka_error_t;
rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
rd_kafka_t *rd_kafka_new(int type, rd_kafka_conf_t *, char *, size_t);
rd_kafka_error_t *rd_kafka_init_transactions(rd_kafka_t *, int);
rd_kafka_error_t *rd_kafka_begin_transaction(rd_kafka_t *);
rd_kafka_error_t *rd_kafka_commit_transaction(rd_kafka_t *, int);
rd_kafka_error_t *rd_kafka_abort_transaction(rd_kafka_t *, int);
const char *rd_kafka_error_string(const rd_kafka_error_t *);
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *, const char *, void *);
int rd_kafka_produce(rd_kafka_topic_t *, int32_t, int, void *, size_t, const void *, size_t, void *);
int rd_kafka_flush(rd_kafka_t *, int);
int rd_kafka_last_error(void);
const char *rd_kafka_err2str(int);
void rd_kafka_topic_destroy(rd_kafka_topic_t *);
void rd_kafka_destroy(rd_kafka_t *);
#define RD_KAFKA_PRODUCER 0
#define RD_KAFKA_MSG_F_COPY 0x2

static void check(const char *what, rd_kafka_error_t *err) {
	if (err) {
		fprintf(stderr, "%s: %s\n", what, rd_kafka_error_string(err));
		exit(1);
	}
}

int main(int argc, char **argv) {
	char errstr[512];
	if (argc < 5) {
		fprintf(stderr, "usage: %s brokers topic txnid step...\n", argv[0]);
		return 2;
	}
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr, sizeof errstr) != 0 ||
	    rd_kafka_conf_set(conf, "transactional.id", argv[3], errstr, sizeof errstr) != 0) {
		fprintf(stderr, "conf: %s\n", errstr);
		return 1;
	}
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
	if (!rk) {
		fprintf(stderr, "new: %s\n", errstr);
		return 1;
	}
	check("init_transactions", rd_kafka_init_transactions(rk, 30000));
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, argv[2], NULL);
	for (int s = 4; s < argc; s++) {
		char op[16], tag[64];
		int n;
		if (sscanf(argv[s], "%15[a-z]:%63[^:]:%d", op, tag, &n) != 3) {
			fprintf(stderr, "bad step %s\n", argv[s]);
			return 2;
		}
		check("begin_transaction", rd_kafka_begin_transaction(rk));
		for (int i = 0; i < n; i++) {
			char value[128];
			int len = snprintf(value, sizeof value, "%s-%03d", tag, i);
			if (rd_kafka_produce(rkt, 0, RD_KAFKA_MSG_F_COPY, value, len, NULL, 0, NULL) != 0) {
				fprintf(stderr, "produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
				return 1;
			}
		}
		/* abort_transaction purges what is still queued: flush first so that
		 * the aborted records are in the log, as the test wants. */
		if (rd_kafka_flush(rk, 30000) != 0) {
			fprintf(stderr, "flush timed out\n");
			return 1;
		}
		if (strcmp(op, "commit") == 0)
			check("commit_transaction", rd_kafka_commit_transaction(rk, 30000));
		else
			check("abort_transaction", rd_kafka_abort_transaction(rk, 30000));
		printf("%s %s %d\n", op, tag, n);
	}
	rd_kafka_topic_destroy(rkt);
	rd_kafka_destroy(rk);
	return 0;
}
`

// buildRdkTxnProducer compiles rdkTxnProducer against the installed
// librdkafka.so.1 (skipped, or failed when CI=true, without gcc or it).
func buildRdkTxnProducer(t *testing.T) string {
	t.Helper()
	gcc := testkit.NeedBinary(t, "gcc")
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "rdk-txn.c"), filepath.Join(dir, "rdk-txn")
	if err := os.WriteFile(src, []byte(rdkTxnProducer), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gcc, "-std=c99", "-O1", "-o", bin, src, "-l:librdkafka.so.1").CombinedOutput()
	if err != nil {
		msg := "cannot build the librdkafka transactional producer (librdkafka1 missing?): " + err.Error() + "\n" + string(out)
		testkit.Missing(t, "%s", msg)
	}
	return bin
}

// TestTxnLibrdkafkaProducer (librdkafka side): a
// librdkafka transactional producer (init, begin, produce, commit/abort)
// works against the broker, and both kcat (librdkafka) and franz-go as
// read_committed consumers see exactly its committed records.
func TestTxnLibrdkafkaProducer(t *testing.T) {
	kcat := testkit.NeedBinary(t, "kcat")
	prog := buildRdkTxnProducer(t)
	b := StartBroker(t)
	const topic = "txn-librdkafka"
	createTopic(t, b.Admin(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, b.Addr, topic, "rdk-txn",
		"commit:committed-a:5", "abort:aborted-b:5", "commit:committed-d:5")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("librdkafka transactional producer: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if want := "commit committed-a 5\nabort aborted-b 5\ncommit committed-d 5\n"; stdout.String() != want {
		t.Fatalf("producer said %q, want %q", stdout.String(), want)
	}
	// 15 records and 3 markers; the last marker may land just after
	// commit_transaction returned.
	adm := b.Admin()
	testkit.WaitFor(t, 30*time.Second, "HW 18 (15 records, 3 markers)", func() bool {
		return endOffsets(t, adm, topic)[0] == 18
	})
	checkKcat(t, kcat, b, topic, "read_committed", []string{"committed-a", "committed-d"})
	checkKcat(t, kcat, b, topic, "read_uncommitted", []string{"committed-a", "aborted-b", "committed-d"})
	rc := readIsolated(t, b, topic, true, 60*time.Second)
	want := []string{}
	for _, tag := range []string{"committed-a", "committed-d"} {
		for _, r := range txnRecords(topic, tag, 5, 1) {
			want = append(want, string(r.Value))
		}
	}
	if d := diffValues(rc.Values(0), want); d != "" {
		t.Fatalf("franz-go read_committed of librdkafka's transactions: %s", d)
	}
	if rc.Controls[0] != 3 {
		t.Errorf("%d transaction markers, want 3 (one per transaction)", rc.Controls[0])
	}
	if stderr.Len() > 0 {
		t.Logf("producer stderr:\n%s", stderr.String())
	}
}
