package registry

// Status is how a tool call ended, as the chat's card, the node's record
// and the service API show it.
type Status string

// The statuses of a call. A tool's own result is Success, Failed or
// TimedOut; the others are set where the call was stopped before it ran.
const (
	// StatusSuccess: the tool did what it was asked.
	StatusSuccess Status = "success"
	// StatusFailed: the tool ran and failed (a command's non-zero exit,
	// a tool's error result), or the sandbox could not run it.
	StatusFailed Status = "failed"
	// StatusTimedOut: the tool's command ran out of time.
	StatusTimedOut Status = "timed out"
	// StatusError: the call itself was wrong (an unknown tool, params
	// that cannot be read); nothing ran.
	StatusError Status = "error"
	// StatusRefused: the policy refused the call; nothing ran.
	StatusRefused Status = "refused"
	// StatusAwaiting: an ask rule matched; the call waits for a person's
	// answer and has not run.
	StatusAwaiting Status = "awaiting approval"
	// StatusRejected: a person rejected the call, or nobody answered in
	// time; it did not run.
	StatusRejected Status = "rejected"
	// StatusLimited: the policy's tool-call limits (P9) left no room for
	// the call; it did not run and does not count.
	StatusLimited Status = "limited"
	// StatusCancelled: the run was stopped, or its client went away,
	// while the call ran; the call was ended (E3).
	StatusCancelled Status = "cancelled"
)

// Of is a result's status: its own, else Failed or Success from IsError.
func (r Result) Of() Status {
	switch {
	case r.Status != "":
		return r.Status
	case r.IsError:
		return StatusFailed
	}
	return StatusSuccess
}
