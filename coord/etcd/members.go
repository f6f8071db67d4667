package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/coord"
)

// Member is one live member of a group: its owner ID and the value it
// registered (where to reach it, its capacity...).
type Member struct {
	Owner, Value string
}

// groupPrefix is the root of group's membership keys; a group has no "/",
// so no group's keys lie under another's.
func (s *Session) groupPrefix(group string) string { return s.prefix + "members/" + group + "/" }

func (s *Session) memberKey(group, owner string) string { return s.groupPrefix(group) + owner }

func checkGroup(group string) error {
	if group == "" || strings.Contains(group, "/") {
		return fmt.Errorf("%w: group %q is empty or contains /", ErrInvalidArgument, group)
	}
	return nil
}

// Register makes this process a member of group with value, for the
// session's life: the key goes with the lease (Close, or the process's
// death) and is put again under every new lease. Registering again
// replaces the value. On an error the membership is not recorded.
func (s *Session) Register(ctx context.Context, group, value string) error {
	_, err := s.register(ctx, group, value)
	return err
}

// register is Register, returning the registration's number in group.
func (s *Session) register(ctx context.Context, group, value string) (uint64, error) {
	if err := checkGroup(group); err != nil {
		return 0, err
	}
	// Holding own blocks a lease's replacement: bound the wait.
	ctx, cancel := context.WithTimeout(ctx, s.ttl/3)
	defer cancel()
	s.own.Lock()
	defer s.own.Unlock()
	lease, err := s.lease()
	if err != nil {
		return 0, err
	}
	if _, err := s.cli.Put(ctx, s.memberKey(group, s.owner), value, clientv3.WithLease(lease)); err != nil {
		return 0, s.callErr(lease, "registering in group "+group, err)
	}
	s.members[group] = value
	s.memberGen[group]++
	return s.memberGen[group], nil
}

// leave withdraws registration gen from group unless a later Register
// replaced it: the member key is deleted and is not put again under a new
// lease. A delete that fails is sent again in the background until it
// succeeds, the group is joined again, or the session closes: the lease
// lives on while the session renews it, so a key left behind would list
// this process as a member of a group it left, for its whole life.
func (s *Session) leave(group string, gen uint64) {
	s.own.Lock()
	if s.memberGen[group] != gen {
		s.own.Unlock()
		return
	}
	delete(s.members, group)
	s.own.Unlock()
	if s.leaveOnce(group, gen) {
		return
	}
	s.mu.Lock() // Close sets closed under mu before it waits for wg
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		for wait := s.ttl / 10; ; wait = min(2*wait, s.ttl) {
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if s.leaveOnce(group, gen) {
				return
			}
		}
	}()
}

// leaveOnce deletes the member key of group unless registration gen was
// replaced since; it reports whether nothing is left to do.
func (s *Session) leaveOnce(group string, gen uint64) bool {
	s.own.Lock()
	defer s.own.Unlock()
	if s.memberGen[group] != gen || s.ctx.Err() != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.callTimeout())
	defer cancel()
	if _, err := s.cli.Delete(ctx, s.memberKey(group, s.owner)); err != nil {
		s.log.Debug("etcd: leaving a group; retrying", "group", group, "err", err)
		return s.ctx.Err() != nil
	}
	return true
}

// Membership returns the session as a coord.Membership (the observer
// workers' partitioned finding): members are registered under the
// session's owner and lease, so a process that dies leaves every group
// when its lease expires. Unlike Session.Register, a registration made
// through it ends with its ctx. One owner is one member of a group: two
// registrations in one group by one session replace each other.
func (s *Session) Membership() coord.Membership { return membership{s} }

type membership struct{ s *Session }

// Register implements coord.Membership: ErrSessionLost and ErrClosed wrap
// coord.ErrNotAlive as well.
func (m membership) Register(ctx context.Context, group, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	gen, err := m.s.register(ctx, group, value)
	if err != nil {
		if errors.Is(err, ErrSessionLost) || errors.Is(err, ErrClosed) {
			return fmt.Errorf("%w: %w", coord.ErrNotAlive, err)
		}
		return err
	}
	context.AfterFunc(ctx, func() { m.s.leave(group, gen) })
	return nil
}

// WatchMembers implements coord.Membership.
func (m membership) WatchMembers(ctx context.Context, group string) <-chan []coord.Member {
	in := m.s.WatchMembers(ctx, group)
	out := make(chan []coord.Member)
	go func() {
		defer close(out)
		for list := range in {
			conv := make([]coord.Member, len(list))
			for i, x := range list {
				conv[i] = coord.Member{Owner: x.Owner, Value: x.Value}
			}
			select {
			case out <- conv:
			case <-ctx.Done():
				for range in { // let the watch end
				}
				return
			}
		}
	}()
	return out
}

// Members returns group's live members, sorted by owner.
func (s *Session) Members(ctx context.Context, group string) ([]Member, error) {
	if err := checkGroup(group); err != nil {
		return nil, err
	}
	if _, err := s.lease(); err != nil {
		return nil, err
	}
	m, _, err := s.getMembers(ctx, group)
	if err != nil {
		return nil, err
	}
	return sorted(m), nil
}

// getMembers reads group's members and the revision they were read at.
func (s *Session) getMembers(ctx context.Context, group string) (map[string]string, int64, error) {
	p := s.groupPrefix(group)
	resp, err := s.cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: reading the members of %s: %w", group, err)
	}
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[string(kv.Key[len(p):])] = string(kv.Value)
	}
	return m, resp.Header.Revision, nil
}

func sorted(m map[string]string) []Member {
	out := make([]Member, 0, len(m))
	for owner, value := range m {
		out = append(out, Member{Owner: owner, Value: value})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Owner, b.Owner) })
	return out
}

// WatchMembers delivers group's members, sorted by owner, at once and
// then after every change (invariant 6); a list equal to the last one
// delivered is skipped. The channel is closed when ctx ends or the
// session is closed, and at once for a bad group or a closed session.
// The receiver must keep reading: the watch waits for it.
func (s *Session) WatchMembers(ctx context.Context, group string) <-chan []Member {
	out := make(chan []Member)
	s.mu.Lock()
	defer s.mu.Unlock()
	if checkGroup(group) != nil || s.mu.closed {
		close(out)
		return out
	}
	s.wg.Add(1)
	go s.watchMembers(ctx, group, out)
	return out
}

func (s *Session) watchMembers(ctx context.Context, group string, out chan<- []Member) {
	defer s.wg.Done()
	defer close(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	var last []Member
	for ctx.Err() == nil {
		m, rev, err := s.getMembers(ctx, group)
		if err != nil {
			s.log.Debug("etcd: membership read failed; retrying", "group", group, "err", err)
			s.sleep(ctx, s.ttl/10)
			continue
		}
		if !s.deliver(ctx, out, &last, m) {
			return
		}
		s.follow(ctx, group, m, rev, out, &last)
	}
}

// follow applies the changes after revision rev to m, delivering each
// new list, until the watch fails (compaction, no leader, the client
// closed) or ctx ends.
func (s *Session) follow(ctx context.Context, group string, m map[string]string, rev int64, out chan<- []Member, last *[]Member) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	p := s.groupPrefix(group)
	for resp := range s.cli.Watch(ctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			s.log.Debug("etcd: membership watch failed; reading again", "group", group, "err", err)
			return
		}
		for _, ev := range resp.Events {
			owner := string(ev.Kv.Key[len(p):])
			if ev.Type == clientv3.EventTypeDelete {
				delete(m, owner)
			} else {
				m[owner] = string(ev.Kv.Value)
			}
		}
		if !s.deliver(ctx, out, last, m) {
			return
		}
	}
	// The channel closed without an error: the client is closing, or ctx
	// ended. Pause so a closed client does not spin the caller's loop.
	s.sleep(ctx, s.ttl/10)
}

// deliver sends m's list unless it equals the last one sent; false when
// ctx ended first.
func (s *Session) deliver(ctx context.Context, out chan<- []Member, last *[]Member, m map[string]string) bool {
	list := sorted(m)
	if *last != nil && slices.Equal(list, *last) {
		return true
	}
	select {
	case out <- list:
		*last = list
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Session) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
