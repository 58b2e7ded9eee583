package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-build/nimbus/backend/apiclient"
	"github.com/nimbus-build/nimbus/backend/billing"
)

func amount(t testing.TB, s string) billing.Amount {
	t.Helper()
	neg := strings.HasPrefix(s, "-")
	a, err := billing.ParseAmount(strings.TrimPrefix(s, "-"))
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	if neg {
		return -a
	}
	return a
}

// checkLedgerAddsUp asserts that the ledger's balance and frozen changes sum to the account's
// balance and frozen amount, and returns the transaction kinds, oldest first.
func (w *world) checkLedgerAddsUp(org string) []string {
	w.t.Helper()
	b := w.alice.billing(org)
	l := w.alice.ledgerPage(org, "")
	var bal, frozen billing.Amount
	var kinds []string
	for i := len(l.Items) - 1; i >= 0; i-- { // newest first
		e := l.Items[i]
		bal += amount(w.t, e.BalanceChange)
		frozen += amount(w.t, e.FrozenChange)
		kinds = append(kinds, e.Kind)
	}
	if bal.Display() != b.Balance || frozen.Display() != b.Frozen {
		w.t.Fatalf("ledger sums to %s/%s, the account shows %s/%s", bal.Display(), frozen.Display(), b.Balance, b.Frozen)
	}
	if amount(w.t, b.Balance) < 0 {
		w.t.Fatalf("balance below zero: %s", b.Balance)
	}
	return kinds
}

// Issue 6's run with the real server, agents and Docker: a GPU pipeline on an account with money
// for two windows is terminated at the third with insufficient_balance; a CPU pipeline uses the
// free quota first and only then money. Windows are 3 s instead of 5 minutes
// (NIMBUS_BILLING_FREEZE_INTERVAL): the rule is the same, the test is short.
func TestBillingFreezesTerminatesAndSettles(t *testing.T) {
	// 10 s windows, the next one frozen 5 s ahead: the stop of a pipeline its team cannot pay
	// for any more reaches the agent (at once, through its control long-poll) before the unpaid
	// window starts. Termination used to come up to a window late, at the agent's next renew.
	w := newWorld(t, "NIMBUS_BILLING_FREEZE_INTERVAL=10s", "NIMBUS_BILLING_FREEZE_LEAD=50",
		"NIMBUS_BILLING_FREE_CPU_CORE_HOURS=0.01") // 36 free core-seconds
	// A GPU host (simulated: no GPU here) and a CPU host.
	w.agent("", "NIMBUS_AGENT_TAGS=cnb:arch:amd64:gpu", "NIMBUS_AGENT_CPUS=16", "NIMBUS_AGENT_GPUS=simulate:1:L40")
	w.agent("")

	// A GPU window is 16 cores × 10 s at 0.5 per core-hour = 0.02222223: money for two.
	window := billing.CostOf(16*10, billing.Scale/2)
	w.alice.grantCredits("ml", (2 * window).String(), "two windows")
	n := w.pushOn("{ tags: cnb:arch:amd64:gpu }", "echo training; sleep 120")
	b := w.waitFor(n, 60*time.Second, "terminated", func(b apiclient.Build) bool { return b.Status != "queued" && b.Status != "running" })
	if b.Status != "terminated" || b.Pipelines[0].Status != "terminated" || b.Pipelines[0].Reason != "insufficient_balance" {
		t.Fatalf("GPU build: %s, pipeline %s (%q)", b.Status, b.Pipelines[0].Status, b.Pipelines[0].Reason)
	}
	// It was stopped before its unpaid window started: nothing, or well under a second, ran
	// uncovered and was written off.
	var settled apiclient.Build
	deadline := time.Now().Add(30 * time.Second)
	for {
		settled = w.build(n)
		if settled.Pipelines[0].UncoveredMs != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if u := settled.Pipelines[0].UncoveredMs; u == nil {
		t.Fatalf("the terminated pipeline was not settled within 30 s: %+v", settled.Pipelines[0])
	} else if *u >= 1000 {
		// The value, not the pointer's address, so that a failure says by how much.
		t.Fatalf("the terminated pipeline ran %d ms past its last paid window (written off %s), want < 1000", *u, settled.Pipelines[0].WrittenOff)
	}
	t.Logf("terminated: uncovered run time %d ms, paid %s, written off %s", *settled.Pipelines[0].UncoveredMs,
		settled.Pipelines[0].Cost, settled.Pipelines[0].WrittenOff)
	kinds := strings.Join(w.checkLedgerAddsUp("ml"), " ")
	if !strings.HasPrefix(kinds, "grant freeze freeze") || !strings.Contains(kinds, "settle") || strings.Count(kinds, "settle") != 1 {
		t.Fatalf("ledger kinds: %s", kinds)
	}

	// A CPU pipeline of 4 cores for ~12 s: 48 core-seconds, of which the free quota pays 36.
	w.alice.grantCredits("ml", "1", "cpu money")
	before := w.alice.billing("ml")
	n = w.pushOn("{ tags: cnb:arch:amd64, cpus: 4 }", "sleep 12")
	b = w.waitFor(n, 90*time.Second, "success", func(b apiclient.Build) bool {
		return b.Status == "success" || b.Status == "failed" || b.Status == "terminated"
	})
	if b.Status != "success" {
		t.Fatalf("CPU build: %+v", b)
	}
	after := w.alice.billing("ml")
	if after.FreeQuota.TotalCoreSeconds != 36 || after.FreeQuota.UsedCoreSeconds != 36 {
		t.Fatalf("free quota %+v: the CPU pipeline must use all 36 free core-seconds", after.FreeQuota)
	}
	if amount(t, after.Balance) >= amount(t, before.Balance) {
		t.Fatalf("no money was charged beyond the free quota: %s → %s", before.Balance, after.Balance)
	}
	w.checkLedgerAddsUp("ml")
}

// A GPU pipeline of an account that cannot pay for its first window waits (README, "Billing":
// the rule for money that is not there), and its card says for what, all at once: no GPU agent,
// and the window's price against the balance, with the remedy. A GPU agent that comes finds
// it unaffordable, and it waits on, for money alone. A grant (what a top-up does) starts it
// within a scheduler tick, and it runs.
func TestUnaffordableGPUPipelineWaitsForMoneyThenRuns(t *testing.T) {
	w := newWorld(t)
	n := w.pushOn("{ tags: cnb:arch:amd64:gpu, cpus: 16 }", "echo paid-for")
	codes := func(b apiclient.Build) string {
		var out []string
		for _, bl := range b.Pipelines[0].Blockers {
			out = append(out, bl.Code)
		}
		return strings.Join(out, " ")
	}
	b := w.waitFor(n, 20*time.Second, "waiting for an agent and for money", func(b apiclient.Build) bool {
		return codes(b) == "no_agent balance"
	})
	if bl := b.Pipelines[0].Blockers[1]; b.Pipelines[0].Status != "queued" || bl.Remedy != "topup" ||
		!strings.Contains(bl.Message, "costs 0.6667 CNY, the balance is 0.0000 CNY") {
		t.Fatalf("the waiting GPU pipeline: %s, %+v", b.Pipelines[0].Status, b.Pipelines[0].Blockers)
	}
	w.agent("", "NIMBUS_AGENT_TAGS=cnb:arch:amd64:gpu", "NIMBUS_AGENT_CPUS=16", "NIMBUS_AGENT_GPUS=simulate:1:L40")
	b = w.waitFor(n, 30*time.Second, "waiting for money alone", func(b apiclient.Build) bool { return codes(b) == "balance" })
	if p := b.Pipelines[0]; p.Status != "queued" || !strings.HasPrefix(p.Reason, "balance insufficient: ") {
		t.Fatalf("with a GPU agent and no money: %s %q", p.Status, p.Reason)
	}
	w.alice.grantCredits("ml", "1", "a top-up")
	b = w.waitFor(n, time.Minute, "run once paid for", func(b apiclient.Build) bool { return b.Status != "queued" && b.Status != "running" })
	if b.Status != "success" {
		t.Fatalf("after the top-up: %s, pipeline %s (%q)", b.Status, b.Pipelines[0].Status, b.Pipelines[0].Reason)
	}
	w.checkLedgerAddsUp("ml")
}
