// Package nodes will hold the workflow runtime and its node plugins; the
// tool-call node, with its useAgentSandbox switch, will live in
// nodes/toolcall. It reaches sandboxes only through sandbox.Manager and
// must never know which provider runs them.
package nodes
