package metadata

import (
	"context"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// TestRetryUnavailable: an unavailable answer (a lease not taken in time
// on a loaded machine) is asked again, up to the bound; any other error,
// or success, ends at once. A build lost its whole run to one such answer.
func TestRetryUnavailable(t *testing.T) {
	unavailable := chunkfs.E("prepare write", "/f", chunkfs.KindUnavailable, "the chosen primary did not take the lease")
	notFound := chunkfs.E("prepare write", "/f", chunkfs.KindNotExist, "no such file")
	for _, tc := range []struct {
		name      string
		answers   []error // the calls' answers in turn; the last repeats
		wantCalls int
		wantErr   error
	}{
		{"succeeds after two", []error{unavailable, unavailable, nil}, 3, nil},
		{"other error at once", []error{notFound}, 1, notFound},
		{"unavailable to the bound", []error{unavailable}, prepareTries, unavailable},
		{"success at once", []error{nil}, 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryUnavailable(context.Background(), prepareTries, 0, func() error {
				calls++
				return tc.answers[min(calls, len(tc.answers))-1]
			})
			if calls != tc.wantCalls || err != tc.wantErr {
				t.Errorf("%d calls, %v; want %d, %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
