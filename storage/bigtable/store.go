package bigtable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	bt "cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/storage"
)

// Family is the one Bigtable column family that holds every cell (see
// the package doc, "Layout").
const Family = "p"

// MaxTimestamp is the largest protocol timestamp a cell may carry here:
// cells are stored at ts×1000 microseconds, an int64.
const MaxTimestamp = (1<<63 - 1) / 1000

// ErrNoTable is returned by Open when the table or its family does not
// exist (run `percolator init --bigtable ...`, or Init).
var ErrNoTable = errors.New("bigtable: no such table (create it with percolator init --bigtable)")

// ErrGCRule is returned by Open and Init when Family has a
// garbage-collection rule (a *GCRuleError names it): see GCRuleError.
var ErrGCRule = errors.New("bigtable: the column family has a garbage-collection rule")

// GCRuleError: Family of the table has a garbage-collection rule. Cell
// times here are protocol timestamps ×1000 µs (the package doc,
// "Layout"), instants in 1970: an age rule deletes every cell at the next
// garbage collection, and a version rule deletes versions still needed (a
// snapshot's data, a rollback record, a lock under a newer write). Any
// rule built of them deletes one or the other. errors.Is(err, ErrGCRule).
type GCRuleError struct {
	Project, Instance, Table string
	// Rule is the rule as Bigtable prints it: "age() > 7d",
	// "versions() > 3", "(age() > 1d || versions() > 1)".
	Rule string
}

func (e *GCRuleError) Error() string {
	return fmt.Sprintf("bigtable: family %q of table %s/%s/%s has the garbage-collection rule %s, "+
		"which deletes live data here (cell times are protocol timestamps, instants in 1970: "+
		"an age rule deletes every cell, a version rule versions that snapshots and the protocol still read); "+
		"remove it with `percolator init --bigtable %s/%s/%s --fix`, or `cbt -project %s -instance %s setgcpolicy %s %s never`",
		Family, e.Project, e.Instance, e.Table, e.Rule,
		e.Project, e.Instance, e.Table, e.Project, e.Instance, e.Table, Family)
}

// Is makes a *GCRuleError match ErrGCRule.
func (e *GCRuleError) Is(target error) bool { return target == ErrGCRule }

// Options configures Open and Init.
type Options struct {
	// Project, Instance and Table name the table. All required.
	Project, Instance, Table string
	// Emulator, if set, is the address of a Bigtable emulator to use
	// without credentials (as the environment variable
	// BIGTABLE_EMULATOR_HOST, which the client library honours when
	// this is empty).
	Emulator string
	// ClientOptions are passed to the Bigtable clients (credentials,
	// endpoint). Without them the client library's defaults apply:
	// Application Default Credentials.
	ClientOptions []option.ClientOption
	// DialOptions are added to the clients' gRPC connections (an
	// interceptor that counts the calls, in the benchmarks).
	DialOptions []grpc.DialOption
	// CASRetries bounds the re-sends of an idempotent conditional
	// mutation (CheckAndMutateIdempotent) after a retryable error.
	// Default 8.
	CASRetries int
	// OpenBudget bounds how long Open, Init and RemoveGCRule wait for
	// the table's description: the client library retries an unreachable
	// Bigtable until its context ends, so without a bound a wrong address
	// or a dead emulator would hang them. Past it they fail with an error
	// matching storage.ErrUnavailable. Default 30s.
	OpenBudget time.Duration
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.CASRetries == 0 {
		o.CASRetries = 8
	}
	if o.OpenBudget == 0 {
		o.OpenBudget = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	switch {
	case o.Project == "" || o.Instance == "" || o.Table == "":
		return fmt.Errorf("%w: bigtable needs a project, an instance and a table", storage.ErrInvalidArgument)
	case o.CASRetries < 0:
		return fmt.Errorf("%w: negative CASRetries", storage.ErrInvalidArgument)
	case o.OpenBudget < 0:
		return fmt.Errorf("%w: negative OpenBudget", storage.ErrInvalidArgument)
	}
	return nil
}

// ParseTable parses "PROJECT/INSTANCE/TABLE" into o.
func (o *Options) ParseTable(s string) error {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return fmt.Errorf("%w: %q is not PROJECT/INSTANCE/TABLE", storage.ErrInvalidArgument, s)
	}
	o.Project, o.Instance, o.Table = parts[0], parts[1], parts[2]
	return nil
}

// clientConfig turns off the client's export of metrics to Cloud
// Monitoring when it talks to an emulator, which has none.
func (o *Options) clientConfig() bt.ClientConfig {
	if o.Emulator != "" || os.Getenv("BIGTABLE_EMULATOR_HOST") != "" {
		return bt.ClientConfig{MetricsProvider: bt.NoopMetricsProvider{}}
	}
	return bt.ClientConfig{}
}

// clientOptions returns the options of one client: with an Emulator, a
// connection of its own (a client closes the connection it is given).
func (o *Options) clientOptions() ([]option.ClientOption, error) {
	if o.Emulator == "" {
		copts := slices.Clip(o.ClientOptions)
		for _, d := range o.DialOptions {
			copts = append(copts, option.WithGRPCDialOption(d))
		}
		return copts, nil
	}
	dopts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, o.DialOptions...)
	conn, err := grpc.NewClient(o.Emulator, dopts...)
	if err != nil {
		return nil, fmt.Errorf("bigtable: emulator %s: %w", o.Emulator, err)
	}
	return append(slices.Clip(o.ClientOptions), option.WithGRPCConn(conn)), nil
}

func (o *Options) admin(ctx context.Context) (*bt.AdminClient, error) {
	copts, err := o.clientOptions()
	if err != nil {
		return nil, err
	}
	admin, err := bt.NewAdminClient(ctx, o.Project, o.Instance, copts...)
	if err != nil {
		return nil, fmt.Errorf("bigtable: admin client: %w", err)
	}
	return admin, nil
}

// Init creates the table and its family if they do not exist. It is
// idempotent. It sets no garbage-collection rule, and refuses a family
// that has one (*GCRuleError, errors.Is ErrGCRule), changing nothing:
// cell times are protocol timestamps, not wall-clock times, so an age
// rule would delete live data, and a version rule the history snapshots
// read (RemoveGCRule removes it). It returns nil only once it has read
// the family back without a rule.
func Init(ctx context.Context, opts Options) error {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return err
	}
	return opts.bounded(ctx, func(ctx context.Context) error { return initTable(ctx, opts) })
}

func initTable(ctx context.Context, opts Options) error {
	admin, err := opts.admin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	info, err := admin.TableInfo(ctx, opts.Table)
	if err != nil {
		if !isNotFound(err) {
			return fmt.Errorf("bigtable: table %s: %w", opts.Table, err)
		}
		if err := admin.CreateTable(ctx, opts.Table); err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("bigtable: create table %s: %w", opts.Table, err)
		}
		info = &bt.TableInfo{}
	}
	if _, found := familyRule(info); !found {
		if err := admin.CreateColumnFamily(ctx, opts.Table, Family); err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("bigtable: create family %s: %w", Family, err)
		}
	}
	return checkFamily(ctx, admin, opts)
}

// RemoveGCRule removes the garbage-collection rule of the table's Family,
// returning the rule it removed ("" if it had none): Bigtable then keeps
// every cell. Removing a rule only stops deletions; the cells it already
// deleted are gone. ErrNoTable if the table or its family does not exist.
func RemoveGCRule(ctx context.Context, opts Options) (removed string, err error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return "", err
	}
	err = opts.bounded(ctx, func(ctx context.Context) error {
		removed, err = removeGCRule(ctx, opts)
		return err
	})
	return removed, err
}

func removeGCRule(ctx context.Context, opts Options) (string, error) {
	admin, err := opts.admin(ctx)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	err = checkFamily(ctx, admin, opts)
	var ruleErr *GCRuleError
	if !errors.As(err, &ruleErr) {
		return "", err
	}
	if err := admin.SetGCPolicy(ctx, opts.Table, Family, bt.NoGcPolicy()); err != nil {
		return "", fmt.Errorf("bigtable: removing the garbage-collection rule of family %s: %w", Family, err)
	}
	if err := checkFamily(ctx, admin, opts); err != nil {
		return "", fmt.Errorf("bigtable: after removing the garbage-collection rule %s: %w", ruleErr.Rule, err)
	}
	return ruleErr.Rule, nil
}

// familyRule returns Family's garbage-collection rule as Bigtable prints
// it ("" for none), and whether the table has the family.
func familyRule(info *bt.TableInfo) (rule string, found bool) {
	for _, f := range info.FamilyInfos {
		if f.Name != Family {
			continue
		}
		if f.FullGCPolicy == nil || bt.GetPolicyType(f.FullGCPolicy) == bt.PolicyUnspecified {
			return "", true
		}
		return f.GCPolicy, true
	}
	return "", false
}

// Store is a storage.Store on one Bigtable table. Safe for concurrent use.
type Store struct {
	opts   Options
	client *bt.Client
	table  *bt.Table
	guard  closeGuard
	calls  atomic.Int64 // Bigtable RPCs sent (Calls)
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.Batcher    = (*Store)(nil)
	_ storage.Counted    = (*Store)(nil)
	_ storage.Idempotent = (*Store)(nil)
	_ storage.Limited    = (*Store)(nil)
	_ storage.SharedRows = (*Store)(nil)
)

// Open connects to the table, which must exist with its family (Init):
// ErrNoTable otherwise.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := checkTable(ctx, opts); err != nil {
		return nil, err
	}
	copts, err := opts.clientOptions()
	if err != nil {
		return nil, err
	}
	client, err := bt.NewClientWithConfig(ctx, opts.Project, opts.Instance, opts.clientConfig(), copts...)
	if err != nil {
		return nil, fmt.Errorf("bigtable: client: %w", err)
	}
	return &Store{opts: opts, client: client, table: client.Open(opts.Table)}, nil
}

// checkTable fails with ErrNoTable unless the table has Family, and with
// a *GCRuleError if the family has a garbage-collection rule.
func checkTable(ctx context.Context, opts Options) error {
	return opts.bounded(ctx, func(ctx context.Context) error {
		admin, err := opts.admin(ctx)
		if err != nil {
			return err
		}
		defer admin.Close()
		return checkFamily(ctx, admin, opts)
	})
}

// bounded runs fn with ctx bounded by OpenBudget; an error after the
// budget ran out matches storage.ErrUnavailable and says where Bigtable
// was looked for.
func (o *Options) bounded(ctx context.Context, fn func(context.Context) error) error {
	spent := fmt.Errorf("%w: no answer from Bigtable (%s) within %v", storage.ErrUnavailable, o.where(), o.OpenBudget)
	bctx, cancel := context.WithTimeoutCause(ctx, o.OpenBudget, spent)
	defer cancel()
	err := fn(bctx)
	switch {
	case err == nil || ctx.Err() != nil || context.Cause(bctx) != spent:
		return err
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return spent
	}
	return fmt.Errorf("%w (last error: %v)", spent, err)
}

// where is where the client looks for Bigtable: the emulator's address,
// or the project and instance.
func (o *Options) where() string {
	switch host := os.Getenv("BIGTABLE_EMULATOR_HOST"); {
	case o.Emulator != "":
		return "the emulator at " + o.Emulator
	case host != "":
		return "the emulator at " + host + ", BIGTABLE_EMULATOR_HOST"
	}
	return o.Project + "/" + o.Instance
}

func checkFamily(ctx context.Context, admin *bt.AdminClient, opts Options) error {
	info, err := admin.TableInfo(ctx, opts.Table)
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("%w: %s/%s/%s", ErrNoTable, opts.Project, opts.Instance, opts.Table)
		}
		return fmt.Errorf("bigtable: table %s: %w", opts.Table, err)
	}
	rule, found := familyRule(info)
	switch {
	case !found:
		return fmt.Errorf("%w: table %s has no family %q", ErrNoTable, opts.Table, Family)
	case rule != "":
		return &GCRuleError{Project: opts.Project, Instance: opts.Instance, Table: opts.Table, Rule: rule}
	}
	return nil
}

// MaxTimestamp implements storage.Limited.
func (s *Store) MaxTimestamp() uint64 { return MaxTimestamp }

// Calls returns the number of Bigtable RPCs this store has sent.
func (s *Store) Calls() int64 { return s.calls.Load() }

// Close implements storage.Store: it waits for the calls in flight.
func (s *Store) Close() error {
	if !s.guard.close() {
		return storage.ErrClosed
	}
	return s.client.Close()
}

// closeGuard lets Close wait for the calls in flight and turns later
// calls away with ErrClosed, without a lock (a Scan callback may call
// back into the store). A call increments active before it loads closed;
// Close stores closed before it loads active.
type closeGuard struct {
	closed atomic.Bool
	active atomic.Int64
}

func (g *closeGuard) enter() error {
	g.active.Add(1)
	if g.closed.Load() {
		g.active.Add(-1)
		return storage.ErrClosed
	}
	return nil
}

func (g *closeGuard) exit() { g.active.Add(-1) }

func (g *closeGuard) close() bool {
	if g.closed.Swap(true) {
		return false
	}
	for g.active.Load() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// SharedRows implements storage.SharedRows: Cloud Bigtable has no
// locality groups.
func (s *Store) SharedRows() bool { return true }
