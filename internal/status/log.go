package status

import (
	"errors"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QuietTerminalErrors wraps a logger so that a terminal error (a Stalled outcome: the
// user's input is wrong, and the object's conditions and a Warning event already say
// what and why) is logged at info, without the stack trace an error carries: it is the
// user's mistake, not the program's. controller-runtime logs every error a reconcile
// returns as "Reconciler error"; a terminal one comes back only when the object or its
// input changes, so it is logged once per change. A write refused because its namespace
// is being deleted (an Event about an object going with it) is logged at V(1). Other
// errors pass unchanged.
func QuietTerminalErrors(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // this wrapper's frame
	}
	return logr.New(&quietSink{sink})
}

type quietSink struct{ logr.LogSink }

func (s *quietSink) Error(err error, msg string, keysAndValues ...any) {
	if errors.Is(err, reconcile.TerminalError(nil)) {
		if s.Enabled(0) {
			s.Info(0, msg+" (stalled: only a change can help)", append(keysAndValues, "reason", Reason(err), "error", err.Error())...)
		}
		return
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// An Event (or any object) written into a namespace that is being deleted: the
		// API server refuses it, and there is nothing to do or to tell (client-go's event
		// broadcaster logs each refusal as an error, stack trace included).
		if s.Enabled(1) {
			s.Info(1, msg+" (its namespace is being deleted)", append(keysAndValues, "error", err.Error())...)
		}
		return
	}
	s.LogSink.Error(err, msg, keysAndValues...)
}

func (s *quietSink) WithValues(keysAndValues ...any) logr.LogSink {
	return &quietSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s *quietSink) WithName(name string) logr.LogSink { return &quietSink{s.LogSink.WithName(name)} }

func (s *quietSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &quietSink{cd.WithCallDepth(depth)}
	}
	return s
}
