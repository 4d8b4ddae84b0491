package bench

import (
	"context"
	"fmt"
)

func setupTask(ctx context.Context, t Task) (runner, error) {
	switch t.Op {
	case OpSink:
		return newSink(t.Addr)
	case OpSource:
		return newSource(ctx, t.Addr, t.Bytes)
	}
	return nil, fmt.Errorf("wip")
}
