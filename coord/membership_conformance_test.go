package coord_test

import (
	"sync"
	"testing"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/coord/coordtest"
)

// TestLocalMembershipConformance: LocalMembership passes the suite every
// Membership passes.
func TestLocalMembershipConformance(t *testing.T) {
	var (
		mu  sync.Mutex
		hub = map[*testing.T]*coord.LocalMembership{}
	)
	root := func(t *testing.T) *coord.LocalMembership {
		mu.Lock()
		defer mu.Unlock()
		if hub[t] == nil {
			hub[t] = coord.NewLocalMembership("root")
		}
		return hub[t]
	}
	coordtest.TestMembership(t, coordtest.MembershipHarness{
		New:  func(t *testing.T, owner string) coord.Membership { return root(t).As(owner) },
		Kill: func(t *testing.T, owner string) { root(t).Remove(owner) },
	})
}
