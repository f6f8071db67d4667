package history

import "testing"

var bank = BankOptions{Accounts: []string{"a", "b", "c"}, Initial: 10}

func transfer(from, to string, amount int64) Mop {
	return Mop{F: Transfer, Key: from, To: to, Arg: amount}
}

func bankRead(b *builder, p int, a, bb, c int64) {
	b.op(p, OK, "read", rd("a", a), rd("b", bb), rd("c", c))
}

func TestBankValid(t *testing.T) {
	var b builder
	b.op(1, OK, "transfer", transfer("a", "b", 3))
	b.op(1, Fail, "transfer", transfer("b", "c", 5))
	b.op(2, Info, "transfer", transfer("c", "a", 2)) // took effect
	b.op(3, Info, "transfer", transfer("a", "c", 4)) // did not
	bankRead(&b, 1, 9, 13, 8)
	r := CheckBank(b.h, bank)
	expectValid(t, r)
	if len(r.Counts) != 0 {
		t.Error(r.Summary())
	}
}

func TestBankAnomalies(t *testing.T) {
	cases := []struct {
		kind, want string
		hist       func(b *builder)
	}{
		{"wrong-total", "T1 read balances summing to 29, not 30", func(b *builder) {
			bankRead(b, 1, 10, 10, 9)
		}},
		{"incomplete-read", "T1 has no balance for account c", func(b *builder) {
			b.op(1, OK, "read", rd("a", 15), rd("b", 15))
		}},
		{"lost-transfer", "T3: account a has 10, not 10 (initial) + -3 (ok transfers)", func(b *builder) {
			b.op(1, OK, "transfer", transfer("a", "b", 3))
			bankRead(b, 1, 10, 10, 10)
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			c.hist(&b)
			expect(t, CheckBank(b.h, bank), c.kind, true, c.want)
		})
	}
}

func TestBankUncheckedAccounts(t *testing.T) {
	var b builder
	for p := range maxInfoTransfers + 1 {
		b.op(p+1, Info, "transfer", transfer("a", "b", 1))
	}
	bankRead(&b, 100, 10, 10, 10)
	r := CheckBank(b.h, bank)
	expectValid(t, r)
	if r.Counts["unchecked-accounts"] != 2 {
		t.Errorf("%s: want a and b unchecked", r.Summary())
	}
}
