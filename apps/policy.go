package apps

import (
	"bytes"
	"context"
	"errors"

	"github.com/flowbox/flowbox/nodes"
)

// PolicyDocument is the app's command policy document: the policy input
// of the first tool-call node that has one in the graph its chats run
// (the published version's, else the draft's); nil for an app without
// one, or no such app (policy.Documents).
func (s *Store) PolicyDocument(ctx context.Context, appID string) ([]byte, error) {
	a, err := s.Get(ctx, appID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	g, _, err := s.Running(ctx, a)
	if err != nil {
		return nil, err
	}
	for _, n := range g.Nodes {
		if raw, ok := policyInput(n); ok {
			return raw, nil
		}
	}
	return nil, nil
}

// CheckPolicies says what is wrong with the command policies of a graph
// about to be saved, node by node, by check (policy.Resolver.Check).
func CheckPolicies(g nodes.Graph, check func(raw []byte) error) []nodes.Problem {
	var problems []nodes.Problem
	for _, n := range g.Nodes {
		if raw, ok := policyInput(n); ok {
			if err := check(raw); err != nil {
				problems = append(problems, nodes.Problem{NodeID: n.NodeID, Field: "policy", Message: err.Error()})
			}
		}
	}
	return problems
}

// policyInput is a tool-call node's policy input, when it has one.
func policyInput(n nodes.Node) ([]byte, bool) {
	raw, ok := n.Inputs["policy"]
	if t := bytes.TrimSpace(raw); n.Type != "tools" || !ok || len(t) == 0 || string(t) == "null" {
		return nil, false
	}
	return raw, true
}
