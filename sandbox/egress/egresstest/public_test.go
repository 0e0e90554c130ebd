//go:build linux

package egresstest_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
)

// The public test server answers from its own network namespace, at its
// address on the veth pair: what the network tests' proxy dials.
func TestPublicServer(t *testing.T) {
	pub := egresstest.NewPublic(t)
	resp, err := http.Get(pub.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != egresstest.PublicBody {
		t.Errorf("got %q, want %q", body, egresstest.PublicBody)
	}
}
