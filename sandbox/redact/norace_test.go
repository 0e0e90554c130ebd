//go:build !race

package redact

// raceDetector: the test binary runs under the race detector.
const raceDetector = false
