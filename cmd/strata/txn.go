package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// runTxn dispatches `strata txn <verb>`: the transactions the coordinators
// hold (ListTransactions, DescribeTransactions) and, for the partitions in
// them, the producers the partition leaders see (DescribeProducers), which
// is how a hanging transaction shows: a producer with a transaction start
// offset on a partition whose coordinator no longer lists it as Ongoing.
func runTxn(ctx context.Context, c *cli, args []string) error {
	return dispatchVerb(ctx, c, "txn", map[string]verb{
		"list":     {txnList, "list transactional ids with their producer id, state and coordinator"},
		"describe": {txnDescribe, "show transactions, their partitions and the producers active on them"},
	}, args)
}

// partialFailure reports whether err is some brokers' failure with the
// others' answers still good to print.
func partialFailure(err error) bool {
	se, ok := errors.AsType[*kadm.ShardErrors](err)
	return ok && !se.AllFailed
}

// listedTxn is one row of `txn list`.
type listedTxn struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
	Coordinator     int32  `json:"coordinator"`
}

func txnList(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("txn list", c)
	admin := adminFlags(fs, c)
	var states stringList
	fs.Var(&states, "state", "list only transactions in `state` (repeatable), e.g. Ongoing")
	asJSON := jsonFlag(fs)
	if rest, err := parseArgs(fs, args); err != nil || len(rest) > 0 {
		return firstErr(err, usageErrorf("txn list takes no arguments"))
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	// A coordinator that fails leaves the others' answers: print those and
	// report the failure.
	listed, listErr := adm.ListTransactions(ctx, nil, states)
	if listErr != nil && !partialFailure(listErr) {
		return listErr
	}
	rows := make([]listedTxn, 0, len(listed))
	for _, t := range listed.Sorted() {
		rows = append(rows, listedTxn{TransactionalID: t.TxnID, ProducerID: t.ProducerID, State: t.State, Coordinator: t.Coordinator})
	}
	if *asJSON {
		return firstErr(writeJSON(c.stdout, rows), listErr)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRANSACTIONAL ID\tPRODUCER ID\tSTATE\tCOORDINATOR")
	for _, t := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", t.TransactionalID, t.ProducerID, t.State, t.Coordinator)
	}
	return firstErr(tw.Flush(), listErr)
}

// describedTxn is what `txn describe` shows of one transactional id: the
// coordinator's view, and for each partition in the transaction the
// producers its leader sees with an open transaction or recent writes.
type describedTxn struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	TimeoutMillis   int32  `json:"timeout_ms"`
	// StartTimestampMillis is when the open transaction began, -1 when
	// none is open; StartTime is the same in RFC 3339, absent then.
	StartTimestampMillis int64          `json:"start_timestamp_ms"`
	StartTime            string         `json:"start_time,omitempty"`
	Partitions           []txnPartition `json:"partitions"`
	Error                string         `json:"error,omitempty"`
}

type txnPartition struct {
	Topic           string           `json:"topic"`
	Partition       int32            `json:"partition"`
	ActiveProducers []activeProducer `json:"active_producers"`
	Error           string           `json:"error,omitempty"` // DescribeProducers failed on this partition
}

// activeProducer is a producer a partition leader keeps state for.
// CurrentTxnStartOffset is the first offset of its open transaction on the
// partition, -1 when none is open; it holds back the last stable offset.
type activeProducer struct {
	ProducerID            int64 `json:"producer_id"`
	ProducerEpoch         int16 `json:"producer_epoch"`
	LastSequence          int32 `json:"last_sequence"`
	LastTimestampMillis   int64 `json:"last_timestamp_ms"`
	CoordinatorEpoch      int32 `json:"coordinator_epoch"`
	CurrentTxnStartOffset int64 `json:"current_txn_start_offset"`
}

func txnDescribe(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("txn describe [ID...]", c)
	admin := adminFlags(fs, c)
	asJSON := jsonFlag(fs)
	ids, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	adm, closeFn, err := admin()
	if err != nil {
		return err
	}
	defer closeFn()
	// No id: kadm lists the transactions first and describes them all.
	described, describeErr := adm.DescribeTransactions(ctx, ids...)
	if describeErr != nil && !partialFailure(describeErr) {
		return describeErr
	}
	txns, err := describeTxns(ctx, adm, ids, described)
	if err != nil {
		return err
	}
	if *asJSON {
		err = writeJSON(c.stdout, txns)
	} else {
		err = printTxns(c.stdout, txns, time.Now())
	}
	return firstErr(err, describeErr, txnsErr(txns))
}

// describeTxns joins the coordinators' answers with DescribeProducers on
// every partition in a transaction. An id asked for but not answered is an
// error row.
func describeTxns(ctx context.Context, adm *kadm.Client, ids []string, described kadm.DescribedTransactions) ([]describedTxn, error) {
	partitions := kadm.TopicsSet{}
	for _, d := range described {
		partitions.Merge(d.Topics)
	}
	var producers kadm.DescribedProducersTopics
	if len(partitions) > 0 {
		var err error
		if producers, err = adm.DescribeProducers(ctx, partitions); producers == nil {
			return nil, fmt.Errorf("describe producers: %w", err)
		}
	}
	if described == nil {
		described = kadm.DescribedTransactions{}
	}
	for _, id := range ids {
		if _, ok := described[id]; !ok {
			described[id] = kadm.DescribedTransaction{TxnID: id, Coordinator: -1, Err: fmt.Errorf("no coordinator answered")}
		}
	}
	out := make([]describedTxn, 0, len(described))
	for _, d := range described.Sorted() {
		out = append(out, newDescribedTxn(d, producers))
	}
	return out, nil
}

func newDescribedTxn(d kadm.DescribedTransaction, producers kadm.DescribedProducersTopics) describedTxn {
	t := describedTxn{TransactionalID: d.TxnID, Coordinator: d.Coordinator, State: d.State, ProducerID: d.ProducerID,
		ProducerEpoch: d.ProducerEpoch, TimeoutMillis: d.TimeoutMillis, StartTimestampMillis: d.StartTimestamp,
		Partitions: []txnPartition{}}
	if d.Err != nil {
		t.Error = d.Err.Error()
		return t
	}
	if d.StartTimestamp >= 0 {
		t.StartTime = time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339Nano)
	}
	for _, tp := range d.Topics.Sorted() {
		for _, p := range tp.Partitions {
			t.Partitions = append(t.Partitions, newTxnPartition(tp.Topic, p, producers))
		}
	}
	return t
}

func newTxnPartition(topic string, partition int32, producers kadm.DescribedProducersTopics) txnPartition {
	tp := txnPartition{Topic: topic, Partition: partition, ActiveProducers: []activeProducer{}}
	dp, ok := producers[topic].Partitions[partition]
	switch {
	case !ok:
		tp.Error = "no leader answered DescribeProducers"
		return tp
	case dp.Err != nil:
		tp.Error = withMessage(dp.Err, dp.ErrMessage).Error()
		return tp
	}
	for _, p := range dp.ActiveProducers.Sorted() {
		tp.ActiveProducers = append(tp.ActiveProducers, activeProducer{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
			LastSequence: p.LastSequence, LastTimestampMillis: p.LastTimestamp, CoordinatorEpoch: p.CoordinatorEpoch,
			CurrentTxnStartOffset: p.CurrentTxnStartOffset})
	}
	return tp
}

// txnsErr is the first transaction that could not be described, so the
// command exits non-zero after printing the others.
func txnsErr(txns []describedTxn) error {
	for _, t := range txns {
		if t.Error != "" {
			return fmt.Errorf("transaction %s: %s", t.TransactionalID, t.Error)
		}
	}
	return nil
}

func printTxns(w io.Writer, txns []describedTxn, now time.Time) error {
	if len(txns) == 0 {
		fmt.Fprintln(w, "no transactions")
	}
	for _, t := range txns {
		if t.Error != "" {
			continue
		}
		fmt.Fprintf(w, "transaction %s  state %s  coordinator %d\n", t.TransactionalID, t.State, t.Coordinator)
		fmt.Fprintf(w, "  producer id %d  epoch %d  timeout %s  started %s\n", t.ProducerID, t.ProducerEpoch,
			formatDuration(time.Duration(t.TimeoutMillis)*time.Millisecond), txnStarted(t.StartTimestampMillis, now))
		if len(t.Partitions) == 0 {
			fmt.Fprintln(w, "  no partitions in the transaction")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TOPIC\tPARTITION\tPRODUCER ID\tEPOCH\tTXN START OFFSET\tLAST SEQUENCE\tLAST WRITE")
		for _, p := range t.Partitions {
			for _, row := range txnPartitionRows(p, now) {
				fmt.Fprintf(tw, "  %s\t%d\t%s\n", p.Topic, p.Partition, row)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// txnPartitionRows are the table cells after topic and partition: one row
// per active producer, or one saying why there is none.
func txnPartitionRows(p txnPartition, now time.Time) []string {
	if p.Error != "" {
		return []string{"error: " + p.Error + "\t\t\t\t"}
	}
	if len(p.ActiveProducers) == 0 {
		return []string{"-\t\t\t\t"}
	}
	var rows []string
	for _, ap := range p.ActiveProducers {
		start := "-"
		if ap.CurrentTxnStartOffset >= 0 {
			start = fmt.Sprint(ap.CurrentTxnStartOffset)
		}
		rows = append(rows, strings.Join([]string{fmt.Sprint(ap.ProducerID), fmt.Sprint(ap.ProducerEpoch), start,
			fmt.Sprint(ap.LastSequence), txnStarted(ap.LastTimestampMillis, now)}, "\t"))
	}
	return rows
}

// txnStarted renders a millisecond timestamp with how long ago it was;
// -1 (none) is "-".
func txnStarted(millis int64, now time.Time) string {
	if millis < 0 {
		return "-"
	}
	at := time.UnixMilli(millis).UTC()
	return fmt.Sprintf("%s (%s ago)", at.Format(time.RFC3339), formatDuration(now.Sub(at)))
}
