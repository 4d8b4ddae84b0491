package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/chunkfs/chunkfs/client"
)

// runHA runs `chunkfs admin ha [CHANGE ARGS]`: with no change it prints
// every master of the group with its role, applied index and lag behind
// the leader; add-voter ID ADDR, add-observer ID ADDR, remove ID and
// transfer-leader [ID] change the group through its leader.
func runHA(ctx context.Context, e *env, cf *clientFlags, asJSON bool, ops []string) error {
	if len(ops) > 0 {
		if err := checkHAChange(ops); err != nil {
			return err
		}
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	if len(ops) > 0 {
		id, addr := "", ""
		if len(ops) > 1 {
			id = ops[1]
		}
		if len(ops) > 2 {
			addr = ops[2]
		}
		return c.HAChange(ctx, ops[0], id, addr)
	}
	nodes, err := haNodes(ctx, c)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, nodes)
	}
	var commit uint64
	for _, n := range nodes {
		if n.Role == "leader" {
			commit = n.Commit
		}
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tVOTER\tROLE\tAPPLIED\tLAG")
	for _, n := range nodes {
		lag := "-"
		if n.Role != "unreachable" && commit > 0 {
			lag = fmt.Sprint(int64(commit) - int64(min(n.Applied, commit)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%s\n", n.ID, n.Addr, n.Voter, n.Role, n.Applied, lag)
	}
	return tw.Flush()
}

// haNode is one master as admin ha shows it.
type haNode struct {
	client.HAMember
	Role    string `json:"role"`
	Applied uint64 `json:"applied"`
	Commit  uint64 `json:"commit"`
	Err     string `json:"error,omitempty"`
}

// haNodes asks the leader for the members, then each member for itself.
func haNodes(ctx context.Context, c *client.Client) ([]haNode, error) {
	st, err := c.HAStatus(ctx)
	if err != nil {
		return nil, err
	}
	var out []haNode
	for _, m := range st.Members {
		n := haNode{HAMember: m}
		if s, err := c.HAStatusOf(ctx, m.Addr); err != nil {
			n.Role, n.Err = "unreachable", oneLine(err)
		} else {
			n.Role, n.Applied, n.Commit = s.Role, s.Applied, s.Commit
		}
		out = append(out, n)
	}
	return out, nil
}

// checkHAChange checks the operands of a group change.
func checkHAChange(ops []string) error {
	switch want := map[string][2]int{"add-voter": {3, 3}, "add-observer": {3, 3}, "remove": {2, 2}, "transfer-leader": {1, 2}}[ops[0]]; {
	case want == [2]int{}:
		return usagef("unknown admin ha change %q; known: add-voter, add-observer, remove, transfer-leader", ops[0])
	case len(ops) < want[0] || len(ops) > want[1]:
		return usagef("admin ha %s takes %s", ops[0], map[string]string{
			"add-voter": "ID HOST:PORT", "add-observer": "ID HOST:PORT", "remove": "ID", "transfer-leader": "[ID]"}[ops[0]])
	}
	return nil
}
