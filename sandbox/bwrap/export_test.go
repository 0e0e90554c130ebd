package bwrap

// AgentTokenFile is the name of a namespace's token beside its sandbox.
const AgentTokenFile = agentTokenFile
