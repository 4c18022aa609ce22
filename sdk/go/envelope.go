package workhorse

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// HandlerError is an error with a name of its own: the name is what an operator sees in the
// job's stored error (the envelope), where a Go type name ("*errors.errorString") would say
// little. It records the stack where it was made. Any error in a chain that has an
// ErrorName() string method names the envelope the same way.
//
//	return nil, workhorse.NewError("PaymentDeclined", "card ending 4242 was declined")
type HandlerError struct {
	Name    string
	Message string
	// Err is the cause, if any (errors.Unwrap returns it).
	Err   error
	stack []uintptr
}

// NewError returns a *HandlerError with this name and message, recording the caller's stack.
func NewError(name, message string) *HandlerError {
	return &HandlerError{Name: name, Message: message, stack: callers()}
}

// WrapError returns a *HandlerError named name whose message is err's, with err as its cause.
func WrapError(name string, err error) *HandlerError {
	return &HandlerError{Name: name, Message: err.Error(), Err: err, stack: callers()}
}

func (e *HandlerError) Error() string     { return e.Message }
func (e *HandlerError) Unwrap() error     { return e.Err }
func (e *HandlerError) ErrorName() string { return e.Name }

// ErrorStack is the stack where the error was made, one "function\n\tfile:line" pair per frame.
func (e *HandlerError) ErrorStack() string {
	var b strings.Builder
	frames := runtime.CallersFrames(e.stack)
	for {
		f, more := frames.Next()
		fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
	return b.String()
}

func callers() []uintptr {
	pcs := make([]uintptr, 32)
	return pcs[:runtime.Callers(3, pcs)]
}

// ToErrorEnvelope is the stored form of a handler's error: the name of the first error in its
// chain that has an ErrorName() string method ("Error" when none has), its message, and the
// stack of the first that has an ErrorStack() string method.
func ToErrorEnvelope(err error) ErrorEnvelope {
	envelope := ErrorEnvelope{Name: "Error", Message: err.Error()}
	var named interface{ ErrorName() string }
	if errors.As(err, &named) {
		envelope.Name = named.ErrorName()
	}
	var stacked interface{ ErrorStack() string }
	if errors.As(err, &stacked) {
		envelope.Stack = stacked.ErrorStack()
	}
	return envelope
}

// panicError is what a handler's panic becomes: a failed attempt whose envelope is named Panic.
type panicError struct {
	value any
	stack string
}

func (e *panicError) Error() string      { return fmt.Sprint(e.value) }
func (e *panicError) ErrorName() string  { return "Panic" }
func (e *panicError) ErrorStack() string { return e.stack }

// errorPartCap is the most characters (runes) of each envelope part a client sends, the same in
// every SDK. The stored bound is SQL's (workhorse.bounded_error: name 200, message and stack
// 32,768 characters, a cut part saying so); this cap, far above it, only keeps the request of
// any error sendable.
const errorPartCap = 1 << 20

// storable makes error text sendable as jsonb: NUL and invalid UTF-8 become U+FFFD, and text
// beyond errorPartCap runes is cut (error text is not under our control, so it is repaired, not
// refused; the database bounds what it stores).
func storable(text string) string {
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "\uFFFD")
	if len(text) <= errorPartCap {
		return text
	}
	runes := 0
	for i := range text {
		if runes == errorPartCap {
			return text[:i]
		}
		runes++
	}
	return text
}
