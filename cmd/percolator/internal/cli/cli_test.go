package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestTargetValidate: exactly one target, the flags that go with it,
// and --lock-ttl and --session-ttl within what the database and the
// session take; each refusal is a usage error naming the flag.
func TestTargetValidate(t *testing.T) {
	for _, tc := range []struct {
		tg   Target
		want string // "" for valid
	}{
		{Target{Dir: "d"}, ""},
		{Target{Dir: "d", LockTTL: 10 * time.Minute}, ""},
		{Target{Server: "s", LockTTL: time.Millisecond, SessionTTL: 3 * time.Second}, ""},
		{Target{}, "--dir, --server or --bigtable is required"},
		{Target{Dir: "d", Server: "s"}, "exclude each other"},
		{Target{Dir: "d", LockTTL: -time.Second}, "--lock-ttl"},
		{Target{Dir: "d", LockTTL: time.Microsecond}, "--lock-ttl"},
		{Target{Dir: "d", SessionTTL: time.Second}, "--session-ttl needs --server or --etcd"},
		{Target{Bigtable: "p/i/t"}, "--bigtable and --etcd go together"},
		{Target{Bigtable: "p/i", Etcd: "e"}, "--bigtable"},
		{Target{Dir: "d", RetryBudget: time.Second}, "--retry-budget needs"},
	} {
		err := tc.tg.Validate()
		var ue UsageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.tg, err)
		case tc.want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want a usage error saying %q", tc.tg, err, tc.want)
		}
	}
}

// TestExitStatus: each kind of outcome maps to its exit status, and the
// error prints named after the command, without the API's prefix.
func TestExitStatus(t *testing.T) {
	ctx := context.Background()
	sigCtx, cancel := context.WithCancelCause(ctx)
	cancel(Interrupted{syscall.SIGINT})
	for _, tc := range []struct {
		ctx    context.Context
		err    error
		status int
		stderr string
	}{
		{ctx, nil, 0, ""},
		{ctx, fmt.Errorf("wrapped: %w", ErrDrained), 0, ""},
		{ctx, ExitCode(7), 7, ""},
		{ctx, Usagef("bad %s", "flag"), 2, "percolator: bad flag\nRun 'percolator -h' for usage.\n"},
		{ctx, UsageError{}, 2, ""},
		{ctx, fmt.Errorf("%w: 1 wrong", ErrFailed), 1, "percolator: check failed: 1 wrong\n"},
		{ctx, errors.New("percolator: store gone"), 1, "percolator: store gone\n"},
		{sigCtx, errors.New("whatever"), 130, "percolator: interrupted by interrupt\n"},
	} {
		var b bytes.Buffer
		if got := ExitStatus(tc.ctx, nil, tc.err, &b); got != tc.status || b.String() != tc.stderr {
			t.Errorf("%v: status %d, stderr %q; want %d, %q", tc.err, got, b.String(), tc.status, tc.stderr)
		}
	}
}

// TestWithTwoDashes: a long flag after one dash gets two; short flags,
// unknown names and everything after "--" are left alone.
func TestWithTwoDashes(t *testing.T) {
	root := &cobra.Command{Use: "p"}
	sub := &cobra.Command{Use: "s"}
	sub.Flags().String("dir", "", "")
	sub.Flags().BoolP("v", "v", false, "")
	root.AddCommand(sub)
	got := WithTwoDashes(root, []string{"s", "-dir=D", "-v", "-nope", "--", "-dir"})
	if want := []string{"s", "--dir=D", "-v", "-nope", "--", "-dir"}; !slices.Equal(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

// TestCheckListen: beyond loopback needs a token, and TLS unless
// insecure; loopback needs neither.
func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr, token     string
		tls, insecure   bool
		beyond, refused bool
	}{
		{"127.0.0.1:1", "", false, false, false, false},
		{"localhost:1", "", false, false, false, false},
		{":1", "", false, false, true, true},
		{"10.0.0.1:1", "tok", false, false, true, true},
		{"10.0.0.1:1", "tok", false, true, true, false},
		{"10.0.0.1:1", "tok", true, false, true, false},
	} {
		beyond, err := checkListen("--listen", tc.addr, tc.token, tc.tls, tc.insecure)
		if beyond != tc.beyond || (err != nil) != tc.refused {
			t.Errorf("%+v: beyond %v, %v", tc, beyond, err)
		}
	}
}
