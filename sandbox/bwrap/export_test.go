package bwrap

// AgentTokenFile is the name of a namespace's token beside its sandbox.
const AgentTokenFile = agentTokenFile

// Dir is the sandbox's directory.
func (p *Provider) Dir(id string) string { return p.dir(id) }
