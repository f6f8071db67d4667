package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/storage"
)

// Options configures a Graph.
type Options struct {
	// MaxBackOff bounds one back-off of a mutation that found the edge
	// locked; 0 means 100ms.
	MaxBackOff time.Duration
	// MaxRetries bounds the fetch-and-lock attempts of one mutation and
	// the re-sends of one of its store calls; 0 means 10.
	MaxRetries int
	// LockExpiry is how old a lock must be before another mutation takes
	// it over; 0 means MaxBackOff × MaxRetries (S2Graph's window).
	LockExpiry time.Duration
	// Now is the wall clock locks are stamped and judged with; nil means
	// time.Now.
	Now func() time.Time
	// DB runs the mutations and queries of labels of consistency Txn, as
	// percolator transactions on it (its Store is usually the Graph's
	// store too).
	DB *percolator.DB
}

func (o *Options) ensureDefaults() {
	if o.MaxBackOff <= 0 {
		o.MaxBackOff = 100 * time.Millisecond
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 10
	}
	if o.LockExpiry <= 0 {
		o.LockExpiry = o.MaxBackOff * time.Duration(o.MaxRetries)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Graph is a property graph on a storage.Store: labels, edges, queries.
// Safe for concurrent use; any number of Graphs, in any processes, may
// share one store.
type Graph struct {
	store storage.Store
	opts  Options
	mu    sync.Mutex
	// labels caches the stored labels by name.
	labels map[string]*Label
	stats  struct{ lockRetries, takeovers atomic.Int64 }
}

// Stats are a Graph's counters since New.
type Stats struct {
	// LockRetries counts the fetches again after a strong mutation found
	// the edge locked or lost the race for its lock; Takeovers, the
	// expired locks taken over.
	LockRetries, Takeovers int64
}

// Stats returns the Graph's counters.
func (g *Graph) Stats() Stats {
	return Stats{LockRetries: g.stats.lockRetries.Load(), Takeovers: g.stats.takeovers.Load()}
}

// New returns a Graph on store.
func New(store storage.Store, opts Options) *Graph {
	opts.ensureDefaults()
	store = userstore.Raw(store) // a DB's Store(): the graph's family is this package's
	return &Graph{store: store, opts: opts, labels: map[string]*Label{}}
}

// CreateLabel stores a label. Creating it again with the same definition
// is a no-op; with another, ErrInvalidArgument.
func (g *Graph) CreateLabel(ctx context.Context, l Label) error {
	if l.Consistency == "" {
		l.Consistency = Strong
	}
	if err := l.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(&l)
	if err != nil {
		return err
	}
	row := labelRow(l.Name)
	pred := storage.Filter{{Family: Family, Qualifier: qualLabel}}
	// A nonce over a server; safe in any order anyway: it writes only
	// where no definition exists, and a definition is never removed.
	matched, err := g.store.CheckAndMutate(ctx, row, pred, nil, []storage.Mutation{storage.SetCell(Family, qualLabel, 1, b)})
	if err != nil {
		return err
	}
	if matched {
		old, err := g.Label(ctx, l.Name)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(normalize(old), normalize(&l)) {
			return fmt.Errorf("%w: label %s exists with another definition", ErrInvalidArgument, l.Name)
		}
	}
	g.mu.Lock()
	g.labels[l.Name] = &l
	g.mu.Unlock()
	return nil
}

func normalize(l *Label) Label {
	c := *l
	if len(c.Indexes) == 0 {
		c.Indexes = nil
	}
	if len(c.Props) == 0 {
		c.Props = nil
	}
	return c
}

// Label returns the stored label name (ErrUnknownLabel if none).
func (g *Graph) Label(ctx context.Context, name string) (*Label, error) {
	g.mu.Lock()
	l := g.labels[name]
	g.mu.Unlock()
	if l != nil {
		return l, nil
	}
	if err := validName("label name", name); err != nil {
		return nil, err
	}
	r, err := g.store.ReadRow(ctx, labelRow(name), storage.Filter{{Family: Family, Qualifier: qualLabel, Limit: 1}})
	if err != nil {
		return nil, err
	}
	if len(r.Cells) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownLabel, name)
	}
	l = new(Label)
	if err := json.Unmarshal(r.Cells[0].Value, l); err != nil {
		return nil, fmt.Errorf("graph: corrupt label %s: %w", name, err)
	}
	g.mu.Lock()
	g.labels[name] = l
	g.mu.Unlock()
	return l, nil
}

// Labels lists the stored labels.
func (g *Graph) Labels(ctx context.Context) ([]*Label, error) {
	var out []*Label
	p := []byte(rowPrefix + "l/")
	err := g.store.Scan(ctx, p, storage.PrefixEnd(p), storage.Filter{{Family: Family, Qualifier: qualLabel, Limit: 1}}, 0, func(r storage.Row) bool {
		l := new(Label)
		if json.Unmarshal(r.Cells[0].Value, l) == nil {
			out = append(out, l)
		}
		return true
	})
	return out, err
}

// backoff sleeps a random time below the attempt's bound (exponential up
// to MaxBackOff).
func (g *Graph) backoff(ctx context.Context, attempt int) error {
	d := max(g.opts.MaxBackOff>>max(0, 6-attempt), 1) // Int64N panics on 0
	return ctxwait.Sleep(ctx, time.Duration(rand.Int64N(int64(d))+1))
}

func (g *Graph) nowMS() int64 { return g.opts.Now().UnixMilli() }
