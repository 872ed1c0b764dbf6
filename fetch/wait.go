package fetch

import (
	"context"
	"reflect"
	"time"
)

// waitAny blocks until one of wake closes (true), or expired fires or ctx
// ends (false). The number of channels is only known at run time, hence
// reflect.Select; it is bounded by the partitions of one request, which the
// request's own size bounds.
func waitAny(ctx context.Context, wake []<-chan struct{}, expired <-chan time.Time) bool {
	cases := make([]reflect.SelectCase, 0, len(wake)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(expired)},
	)
	seen := make(map[<-chan struct{}]struct{}, len(wake))
	for _, ch := range wake {
		if _, dup := seen[ch]; dup || ch == nil {
			continue // the same partition requested twice, or never changes
		}
		seen[ch] = struct{}{}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 2
}
