package billing

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nimbus-build/nimbus/backend/redisconn"
)

// Run drives billing's own background work until ctx ends: on the one replica holding billing's
// leader lock, TickOnce every tick. It is its own loop (not a step of the scheduler's leader
// tick) because freezing windows and settling are billing's business; the scheduler only asks
// billing, through its Meter, whether a pipeline may start.
func (s *Service) Run(ctx context.Context, rdb redis.UniversalClient, tick time.Duration) {
	if tick <= 0 {
		tick = 5 * time.Second
	}
	lead := redisconn.NewLeader(rdb, "nimbus:leader:billing", 3*tick)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if lead.Hold(ctx) {
			// A tick cut short by the server's own shutdown is no failure.
			if err := s.TickOnce(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "billing tick", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// TickOnce freezes the next window of running pipelines and has the ones their account can no
// longer cover stopped (Config.Stop: their agents are told at once, and they end terminated
// with reason insufficient_balance when the agent reports, or when their lease expires). It
// also settles pipelines that ended while a settlement failed (SettleEnded).
func (s *Service) TickOnce(ctx context.Context) error {
	stop, err := s.Tick(ctx)
	if s.cfg.Stop != nil {
		for _, id := range stop {
			if serr := s.cfg.Stop(ctx, id); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}
	if _, serr := s.SettleEnded(ctx); serr != nil {
		err = errors.Join(err, serr)
	}
	return err
}
