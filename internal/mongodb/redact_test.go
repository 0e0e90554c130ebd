package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestRedactErr: a driver error quoting the password, as written or
// percent-decoded, shows neither and still unwraps to its cause.
func TestRedactErr(t *testing.T) {
	const uri = "mongodb://flowbox:p%40ss@db:27017/"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"raw", fmt.Errorf("auth p%%40ss failed: %w", context.DeadlineExceeded), "auth xxxxx failed: context deadline exceeded"},
		{"decoded", fmt.Errorf("auth p@ss failed: %w", context.DeadlineExceeded), "auth xxxxx failed: context deadline exceeded"},
		{"clean", fmt.Errorf("no server: %w", context.DeadlineExceeded), "no server: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redactErr(tt.err, uri)
			if got.Error() != tt.want {
				t.Errorf("redactErr = %q, want %q", got, tt.want)
			}
			if strings.Contains(got.Error(), "p@ss") || strings.Contains(got.Error(), "p%40ss") {
				t.Errorf("redactErr = %q shows the password", got)
			}
			if !errors.Is(got, context.DeadlineExceeded) {
				t.Errorf("redactErr(%v) lost its cause", tt.err)
			}
		})
	}
}
