package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WarningEvents lists the Warning events (events.k8s.io) with reason about the object
// called name in namespace.
func WarningEvents(tb testing.TB, c client.Reader, namespace, name, reason string) []eventsv1.Event {
	tb.Helper()
	var out []eventsv1.Event
	for _, e := range Events(tb, c, namespace, name, reason) {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out
}

// Events lists the events (events.k8s.io) with reason about the object called name in
// namespace, of either type.
func Events(tb testing.TB, c client.Reader, namespace, name, reason string) []eventsv1.Event {
	tb.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
		tb.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
