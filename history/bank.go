package history

import (
	"fmt"
	"sort"
)

// BankOptions describes the bank: its accounts and each one's initial
// balance.
type BankOptions struct {
	Accounts []string
	Initial  int64
}

// maxInfoTransfers bounds the info transfers touching an account whose
// subsets the final check tries (2^16 sums at most).
const maxInfoTransfers = 16

// CheckBank checks a bank history: operations F "transfer" ([transfer
// from->to amount]) and F "read" ([r acct [balance]] for every account).
// Every ok read has every account ("incomplete-read") and sums to
// len(Accounts)*Initial ("wrong-total"). The last ok read, when invoked
// after every ok and failed transfer completed, must give each account
// its initial balance plus the ok transfers' deltas plus those of some
// subset of the info transfers touching it ("lost-transfer"); an account
// touched by more than 16 info transfers is counted in
// Counts["unchecked-accounts"] instead.
func CheckBank(h []Op, o BankOptions) Result {
	pairs, bad := pairsOrReport("bank", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("bank", pairs)
	var last *Pair
	for i, p := range pairs {
		if p.Invoke.F == "read" && p.Outcome() == OK {
			checkBankRead(rep, o, p)
			if last == nil || p.Completion.Index > last.Completion.Index {
				last = &pairs[i]
			}
		}
	}
	if last != nil && isFinal(pairs, *last) {
		checkFinal(rep, o, pairs, *last)
	}
	return rep.result()
}

// balances are a read's balances by account.
func balances(p Pair) map[string]int64 {
	b := map[string]int64{}
	for _, m := range p.mops() {
		if m.F == Read && len(m.Read) == 1 {
			b[m.Key] = m.Read[0]
		}
	}
	return b
}

func checkBankRead(rep *report, o BankOptions, p Pair) {
	b := balances(p)
	var sum int64
	for _, a := range o.Accounts {
		v, ok := b[a]
		if !ok {
			rep.add(Anomaly{Kind: "incomplete-read", Forbidden: true, Ops: []Op{p.last()},
				Explanation: fmt.Sprintf("%s has no balance for account %s", name(p.last()), a)})
			return
		}
		sum += v
	}
	if want := int64(len(o.Accounts)) * o.Initial; sum != want {
		rep.add(Anomaly{Kind: "wrong-total", Forbidden: true, Ops: []Op{p.last()},
			Explanation: fmt.Sprintf("%s read balances summing to %d, not %d: %v", name(p.last()), sum, want, mopsString(p.mops()))})
	}
}

// isFinal: the read was invoked after every ok or failed transfer
// completed, so every transfer that happened is in it, info ones aside.
func isFinal(pairs []Pair, read Pair) bool {
	for _, p := range pairs {
		if p.Invoke.F == "transfer" && p.completeTime() != infinity && p.completeTime() >= read.invokeTime() {
			return false
		}
	}
	return true
}

// checkFinal checks each account's final balance against the transfers.
func checkFinal(rep *report, o BankOptions, pairs []Pair, final Pair) {
	b := balances(final)
	for _, a := range o.Accounts {
		v, ok := b[a]
		if !ok {
			return // reported as incomplete-read
		}
		okDelta, infos := accountDeltas(pairs, a)
		if len(infos) > maxInfoTransfers {
			rep.note("unchecked-accounts")
			continue
		}
		if !subsetSums(infos)[v-o.Initial-okDelta] {
			rep.add(Anomaly{Kind: "lost-transfer", Forbidden: true, Ops: []Op{final.last()},
				Explanation: fmt.Sprintf("%s: account %s has %d, not %d (initial) + %d (ok transfers) + the sum of any subset of its %d info transfers %v",
					name(final.last()), a, v, o.Initial, okDelta, len(infos), infos)})
		}
	}
}

// accountDeltas sums the ok transfers' deltas on account a and lists the
// info ones'.
func accountDeltas(pairs []Pair, a string) (okDelta int64, infos []int64) {
	for _, p := range pairs {
		if p.Invoke.F != "transfer" || p.Outcome() == Fail {
			continue
		}
		for _, m := range p.mops() {
			d := transferDelta(m, a)
			switch {
			case d == 0:
			case p.Outcome() == OK:
				okDelta += d
			default:
				infos = append(infos, d)
			}
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i] < infos[j] })
	return okDelta, infos
}

func transferDelta(m Mop, a string) int64 {
	switch {
	case m.F != Transfer || m.Key == m.To:
		return 0
	case m.Key == a:
		return -m.Arg
	case m.To == a:
		return m.Arg
	}
	return 0
}

// subsetSums is every sum of a subset of ds.
func subsetSums(ds []int64) map[int64]bool {
	sums := map[int64]bool{0: true}
	for _, d := range ds {
		next := make(map[int64]bool, 2*len(sums))
		for s := range sums {
			next[s], next[s+d] = true, true
		}
		sums = next
	}
	return sums
}
