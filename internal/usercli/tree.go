package usercli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is one line of describe's tree and the lines under it.
type node struct {
	Text     string
	Children []*node
}

// add appends a child with text (printf-style) and returns it.
func (n *node) add(format string, args ...any) *node {
	c := &node{Text: fmt.Sprintf(format, args...)}
	n.Children = append(n.Children, c)
	return c
}

// adopt appends children (nil ones are skipped).
func (n *node) adopt(children ...*node) {
	for _, c := range children {
		if c != nil {
			n.Children = append(n.Children, c)
		}
	}
}

// renderTree writes the tree as clusterctl describe does, with box-drawing branches.
// Text is kept on one line.
func renderTree(w io.Writer, root *node) error {
	var b strings.Builder
	b.WriteString(flat(root.Text) + "\n")
	var walk func(n *node, prefix string)
	walk = func(n *node, prefix string) {
		for i, c := range n.Children {
			branch, next := "├─", "│ "
			if i == len(n.Children)-1 {
				branch, next = "└─", "  "
			}
			b.WriteString(prefix + branch + flat(c.Text) + "\n")
			walk(c, prefix+next)
		}
	}
	walk(root, "")
	_, err := io.WriteString(w, b.String())
	return err
}

func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// headNode is the first line of an object's tree: kind, name, Ready, reason, age; and,
// with message (kinds without a Ready condition to show it), why.
func headNode(r row, now time.Time, message bool) *node {
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + r.Name
	}
	text := fmt.Sprintf("%s %s  Ready=%s", r.Kind.Kind, name, r.Ready)
	if r.Reason != "" {
		text += " " + r.Reason
	}
	text += "  age " + age(r.Created, now)
	n := &node{Text: text}
	if message && r.Message != "" {
		n.add("%s", r.Message)
	}
	return n
}

// conditionsNode lists conditions, Ready first.
func conditionsNode(conds []metav1.Condition, now time.Time) *node {
	if len(conds) == 0 {
		return nil
	}
	n := &node{Text: "Conditions"}
	sorted := append([]metav1.Condition(nil), conds...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Type == "Ready" && sorted[j].Type != "Ready" })
	for _, c := range sorted {
		text := fmt.Sprintf("%s=%s", c.Type, c.Status)
		if c.Reason != "" {
			text += " " + c.Reason
		}
		if c.Message != "" {
			text += ": " + c.Message
		}
		text += " (" + when(c.LastTransitionTime.Time, now) + ")"
		n.add("%s", text)
	}
	return n
}

// maxEvents is how many events describe shows: the latest.
const maxEvents = 10

// eventsNode lists the latest events, oldest first, as kubectl describe does.
func eventsNode(events []corev1.Event, now time.Time) *node {
	if len(events) == 0 {
		return &node{Text: "Events: none"}
	}
	sorted := append([]corev1.Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return eventTime(sorted[i]).Before(eventTime(sorted[j])) })
	n := &node{Text: "Events"}
	if len(sorted) > maxEvents {
		n.Text = fmt.Sprintf("Events (latest %d of %d)", maxEvents, len(sorted))
		sorted = sorted[len(sorted)-maxEvents:]
	}
	for _, e := range sorted {
		text := fmt.Sprintf("%s %s %s", when(eventTime(e), now), e.Type, e.Reason)
		if e.Count > 1 {
			text += fmt.Sprintf(" (x%d)", e.Count)
		}
		if e.Series != nil && e.Series.Count > 1 {
			text += fmt.Sprintf(" (x%d)", e.Series.Count)
		}
		if e.Message != "" {
			text += ": " + e.Message
		}
		n.add("%s", text)
	}
	return n
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
