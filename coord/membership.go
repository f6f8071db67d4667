package coord

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
)

// ErrNotAlive is returned by Membership.Register when the caller's own
// liveness has ended (its session expired, or Remove simulated its death):
// a dead owner cannot join a group again; identities are never reused.
var ErrNotAlive = errors.New("coord: owner is not alive")

// Member is one live process of a group: Owner is the identity the
// Membership registered it under (its liveness), Value what it registered.
type Member struct{ Owner, Value string }

// Membership is the live processes of named groups, each registered under
// its liveness: a member that dies (its liveness ends) leaves every group
// it joined. The observer workers use it to split the notify keyspace
// among themselves. Implementations are safe for concurrent use.
//
// A Membership is one owner's handle: what it registers is registered
// under that owner (etcd: a key under its session's lease).
type Membership interface {
	// Register makes the owner a member of group with value, replacing the
	// value of an earlier registration of the owner in group. The member
	// stays until ctx ends (it then leaves, at once or when its liveness
	// lapses) or the owner dies. Errors: ErrNotAlive when the owner's
	// liveness has ended; ctx's error; the service's errors (the caller is
	// then not registered).
	Register(ctx context.Context, group, value string) error

	// WatchMembers returns a channel that receives the full list of group's
	// members, sorted by Owner: once at the start, then after every change
	// (a list that is not read before the next change may be replaced by
	// the newer one). The channel is closed when ctx ends, or when the
	// service can no longer watch (the caller then knows no membership).
	WatchMembers(ctx context.Context, group string) <-chan []Member
}

// LocalMembership is an in-process Membership, for tests: every handle
// made from one NewLocalMembership (with As) shares one set of groups, and
// registers under its own owner. Remove simulates an owner's death.
// Safe for concurrent use.
type LocalMembership struct {
	owner string
	hub   *memberHub
}

var _ Membership = (*LocalMembership)(nil)

// memberHub is the groups every handle of a LocalMembership shares.
type memberHub struct {
	mu struct {
		sync.Mutex
		next     uint64                           // registration ids
		groups   map[string]map[string]localEntry // group → owner → entry
		dead     map[string]bool                  // owners removed
		watchers map[string]map[chan struct{}]struct{}
	}
}

// localEntry is one registration. Invariant: id is unique, so that the
// end of an earlier registration's ctx never removes a later one.
type localEntry struct {
	value string
	id    uint64
}

// NewLocalMembership returns the handle of owner on a new, empty set of
// groups.
func NewLocalMembership(owner string) *LocalMembership {
	h := &memberHub{}
	h.mu.groups = map[string]map[string]localEntry{}
	h.mu.dead = map[string]bool{}
	h.mu.watchers = map[string]map[chan struct{}]struct{}{}
	return &LocalMembership{owner: owner, hub: h}
}

// As returns the handle of another owner on the same groups (another
// process).
func (m *LocalMembership) As(owner string) *LocalMembership {
	return &LocalMembership{owner: owner, hub: m.hub}
}

// Owner is the identity this handle registers under.
func (m *LocalMembership) Owner() string { return m.owner }

// Remove simulates owner's death: it leaves every group, and its later
// Registers fail with ErrNotAlive.
func (m *LocalMembership) Remove(owner string) {
	h := m.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.dead[owner] = true
	for group, owners := range h.mu.groups {
		if _, ok := owners[owner]; ok {
			delete(owners, owner)
			h.kickLocked(group)
		}
	}
}

// Members returns group's members now, sorted by Owner.
func (m *LocalMembership) Members(group string) []Member {
	m.hub.mu.Lock()
	defer m.hub.mu.Unlock()
	return m.hub.membersLocked(group)
}

// Register implements Membership: the member leaves when ctx ends.
func (m *LocalMembership) Register(ctx context.Context, group, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h := m.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.dead[m.owner] {
		return ErrNotAlive
	}
	h.mu.next++
	e := localEntry{value: value, id: h.mu.next}
	if h.mu.groups[group] == nil {
		h.mu.groups[group] = map[string]localEntry{}
	}
	h.mu.groups[group][m.owner] = e
	h.kickLocked(group)
	context.AfterFunc(ctx, func() { h.leave(group, m.owner, e.id) })
	return nil
}

// leave removes owner's registration id from group, if it is still there.
func (h *memberHub) leave(group, owner string, id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.mu.groups[group][owner]; ok && e.id == id {
		delete(h.mu.groups[group], owner)
		h.kickLocked(group)
	}
}

// WatchMembers implements Membership. One goroutine per watch, ended with
// ctx; lists nobody read in time are replaced by the newest, and a change
// that leaves the list as it was sends nothing.
func (m *LocalMembership) WatchMembers(ctx context.Context, group string) <-chan []Member {
	h := m.hub
	out := make(chan []Member)
	kick := make(chan struct{}, 1)
	h.mu.Lock()
	if h.mu.watchers[group] == nil {
		h.mu.watchers[group] = map[chan struct{}]struct{}{}
	}
	h.mu.watchers[group][kick] = struct{}{}
	h.mu.Unlock()
	go func() {
		defer close(out)
		defer func() {
			h.mu.Lock()
			delete(h.mu.watchers[group], kick)
			h.mu.Unlock()
		}()
		var last []Member
		for first := true; ; first = false {
			h.mu.Lock()
			cur := h.membersLocked(group)
			h.mu.Unlock()
			if first || !slices.Equal(cur, last) {
				select {
				case out <- cur:
					last = cur
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-kick:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// kickLocked wakes group's watchers (without waiting for them).
func (h *memberHub) kickLocked(group string) {
	for k := range h.mu.watchers[group] {
		select {
		case k <- struct{}{}:
		default: // already woken: it reads the newest list
		}
	}
}

// membersLocked is group's member list, sorted by Owner.
func (h *memberHub) membersLocked(group string) []Member {
	list := make([]Member, 0, len(h.mu.groups[group]))
	for owner, e := range h.mu.groups[group] {
		list = append(list, Member{Owner: owner, Value: e.value})
	}
	slices.SortFunc(list, func(a, b Member) int { return strings.Compare(a.Owner, b.Owner) })
	return list
}
