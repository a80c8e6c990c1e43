package usercli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trustplane/trustplane/api/conditions"
)

func newReconcileCommand() *cobra.Command {
	var wait bool
	var timeout time.Duration
	reconcilable := reconcilableKinds()
	names := make([]string, len(reconcilable))
	for i, k := range reconcilable {
		names[i] = k.Name
	}
	cmd := &cobra.Command{
		Use:   "reconcile KIND NAME",
		Short: "Ask a controller to reconcile an object now (annotation " + conditions.ReconcileRequestedAnnotation + "), as flux reconcile does",
		Long: `Ask the object's controller to reconcile it now, as flux reconcile does: the annotation
` + conditions.ReconcileRequestedAnnotation + ` is set to the current time, the controller
reconciles and records the value it handled in status.lastHandledReconcileAt. With
--wait (the default) the command waits for that, then prints the object's Ready state.

Kinds, each with the controller of trustplane manager (--controllers) that reconciles it:
` + kindList(reconcilable) + `
The others follow what they read (Secrets, roles, Ingresses) and have no reconcile to
ask for.`,
		Example: examples("reconcile jwksconfig issuer -n default", "reconcile cluster prod -n tenants --timeout 5m"),
		Args:    cobra.ExactArgs(2),
		GroupID: GroupDay2,
	}
	f := newClientFlags(cmd, false, true)
	cmd.Flags().BoolVar(&wait, "wait", true, "Wait until the controller has handled the request.")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long --wait waits.")
	cmd.ValidArgsFunction = completeKindAndName(f, reconcilable)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		k, err := kindNamed(args[0])
		if err != nil {
			return err
		}
		if k.controller == "" {
			return fmt.Errorf("a %s has no reconcile to ask for: its controller follows what it reads; kinds: %s", k.Name, strings.Join(names, ", "))
		}
		c, ns, err := f.connect(errOut(cmd))
		if err != nil {
			return err
		}
		r, err := getRow(cmd.Context(), c, k, ns, args[1], time.Now())
		if err != nil {
			return err
		}
		obj := r.Object
		at := time.Now().UTC().Format(time.RFC3339Nano)
		if err := annotate(cmd.Context(), c, obj, conditions.ReconcileRequestedAnnotation, at); err != nil {
			return apiError(err, k, ns, obj.GetName())
		}
		name := k.Name + "/" + obj.GetName()
		if !wait {
			fmt.Fprintf(out(cmd), "%s: reconcile requested at %s\n", name, at)
			return nil
		}
		err = waitFor(cmd.Context(), c, obj, timeout, func() error {
			if obj.(conditions.ReconcileRequestStatus).GetLastHandledReconcileAt() != at {
				return fmt.Errorf("the controller has not handled the request of %s yet (is trustplane manager running with the %s controller?)", at, k.controller)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r = k.rowOf(obj, time.Now())
		fmt.Fprintf(out(cmd), "%s: reconciled; Ready=%s %s %s\n", name, r.Ready, r.Reason, r.Message)
		if !r.settled() {
			return fmt.Errorf("%s is not Ready", name)
		}
		return nil
	}
	return cmd
}

// reconcilableKinds are the kinds whose controller honours
// conditions.ReconcileRequestedAnnotation, in kinds' order.
func reconcilableKinds() []*kind {
	var out []*kind
	for _, k := range kinds {
		if k.controller != "" {
			out = append(out, k)
		}
	}
	return out
}

// kindList is a help text's list of kinds, one a line: name, Kind and controller.
func kindList(ks []*kind) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
	for _, k := range ks {
		fmt.Fprintf(tw, "  %s\t%s, by the %s controller\n", k.Name, k.Kind, k.controller)
	}
	_ = tw.Flush()
	return b.String()
}
