package web_test

import (
	"testing"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

// TestMain stops the embedded database the test binary shares (its
// internal and external tests alike) once every test has run.
func TestMain(m *testing.M) { mongotest.Main(m) }
