package llm

import (
	"fmt"
	"sync"
)

// Resolver gives the model a node names: the demo model for
// DemoModelName, otherwise a client of the configured endpoint (one per
// base URL and key, reused).
type Resolver struct {
	// Endpoint is the default OpenAI-compatible endpoint. Without a base
	// URL only the demo model is available.
	Endpoint Config

	mu      sync.Mutex
	clients map[string]*Client
}

// Model implements nodes.Models.
func (r *Resolver) Model(name string) (Model, error) {
	if name == DemoModelName || name == "" {
		return Demo{}, nil
	}
	if r.Endpoint.BaseURL == "" {
		return nil, fmt.Errorf("model %q needs a model endpoint: set FLOWBOX_LLM_BASE_URL (and FLOWBOX_LLM_API_KEY), or use the offline model %q", name, DemoModelName)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := r.Endpoint.BaseURL + "\x00" + r.Endpoint.APIKey
	if c := r.clients[key]; c != nil {
		return c, nil
	}
	c, err := NewClient(r.Endpoint)
	if err != nil {
		return nil, err
	}
	if r.clients == nil {
		r.clients = map[string]*Client{}
	}
	r.clients[key] = c
	return c, nil
}
