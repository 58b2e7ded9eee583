package agent

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/nimbus-build/nimbus/internal/protocol"
)

// capacity is what the agent has free: cores, GPU device ids and pipeline slots. Every lease
// holds its pipeline's cores (at least one) and the GPUs the server gave it until it ends.
type capacity struct {
	mu          sync.Mutex
	cpus, used  int
	concurrency int
	gpus        []string        // the host's device ids, in index order
	busy        map[string]bool // device ids held by running leases
	running     []string        // lease ids
	freed       chan struct{}   // closed and replaced whenever something is released
}

func newCapacity(cpus, concurrency int, gpus []protocol.GPU) *capacity {
	c := &capacity{cpus: cpus, concurrency: concurrency, busy: map[string]bool{}, freed: make(chan struct{})}
	for _, g := range gpus {
		c.gpus = append(c.gpus, strconv.Itoa(g.Index))
	}
	return c
}

// full reports whether the agent can take no more work: every slot or every core is held.
func (c *capacity) full() bool {
	return len(c.running) >= c.concurrency || c.cpus-c.used < 1
}

// waitFree waits until the agent can take work; false when ctx ended first.
func (c *capacity) waitFree(ctx context.Context) bool {
	for {
		c.mu.Lock()
		if !c.full() {
			c.mu.Unlock()
			return true
		}
		ch := c.freed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// request is the poll that states the free capacity.
func (c *capacity) request() protocol.PollRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := protocol.PollRequest{FreeCPUs: max(c.cpus-c.used, 0), Running: slices.Clone(c.running)}
	for _, id := range c.gpus {
		if !c.busy[id] {
			req.FreeGPUs = append(req.FreeGPUs, id)
		}
	}
	return req
}

func leaseCPUs(l *protocol.Lease) int { return max(l.Plan.Runner.Cpus, 1) }

// take reserves what a lease holds.
func (c *capacity) take(l *protocol.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used += leaseCPUs(l)
	for _, id := range l.GPUs {
		c.busy[id] = true
	}
	c.running = append(c.running, l.ID)
}

// release frees what a lease held.
func (c *capacity) release(l *protocol.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used -= leaseCPUs(l)
	for _, id := range l.GPUs {
		delete(c.busy, id)
	}
	if i := slices.Index(c.running, l.ID); i >= 0 {
		c.running = slices.Delete(c.running, i, i+1)
	}
	close(c.freed)
	c.freed = make(chan struct{})
}

// runningCount is how many leases run now.
func (c *capacity) runningCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running)
}
