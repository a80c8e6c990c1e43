package usercli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

func checkOutput(o string) error {
	switch o {
	case outputTable, outputWide, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use table, wide, json or yaml", o)
}

func newGetCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "get [KIND[,KIND...]] [NAME]",
		Short: "List trustplane objects of the five systems with Ready, reason, age and each kind's key facts; exit 1 if one is not Ready",
		Long: `List the objects of the five systems: JWKSConfigs (current kid, key count), aggregating
ClusterRoles and Roles (rule count, compared with what aggregation makes of the roles
they select now), SecretCheckSums and IngressCheckSums (checksum, ID count, scope),
PodCertificateRequests (state, notAfter), the pod certificate signer's CA (its
ClusterTrustBundle), Clusters (phase), KubeconfigRequests (expiry) and
SubscriptionRequests (credential). Without KIND, every kind: those of one namespace
(-n, or the context's), or with -A every namespace's and the cluster-scoped ones.

Objects that are not Ready come first; the exit status is 1 when any listed object is
not Ready, so scripts and CI can wait on it. A KubeconfigRequest revoked on purpose
(Ready=False Revoked) is as asked: it is listed with the Ready ones and is no failure.
While a change is in progress on a Ready object (a JWKSConfig's update throttled by the
minimum update interval, its new set not served yet), REASON is the change's (the
Reconciling condition's). Kinds: ` + strings.Join(kindNames(), ", ") + ".",
		Example: examples(
			"get -A                          # everything, not-Ready first",
			"get jwksconfig -n default       # one kind",
			"get kcr reader -o wide          # one object, more columns",
			"get clusters,kubeconfigrequests -A -o yaml",
		),
		Args:    cobra.MaximumNArgs(2),
		GroupID: GroupDay2,
	}
	f := newClientFlags(cmd, true, true)
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "Output format: table, wide, json or yaml.")
	cmd.ValidArgsFunction = completeKindAndName(f, nil)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(output); err != nil {
			return err
		}
		// Without a KIND, one namespace's objects are those of the namespaced kinds, as
		// kubectl get all; -A adds the cluster-scoped ones (aggregating ClusterRoles, the
		// signer's CA).
		var selected []*kind
		for _, k := range kinds {
			if k.Namespaced || f.allNamespaces {
				selected = append(selected, k)
			}
		}
		if len(args) > 0 {
			selected = nil
			for _, name := range strings.Split(args[0], ",") {
				if name == "all" {
					selected = append(selected, kinds...)
					continue
				}
				k, err := kindNamed(name)
				if err != nil {
					return err
				}
				selected = append(selected, k)
			}
		}
		name := ""
		if len(args) == 2 {
			if len(selected) != 1 {
				return errors.New("a NAME needs exactly one KIND")
			}
			name = args[1]
		}
		c, ns, err := f.connect(errOut(cmd))
		if err != nil {
			return err
		}
		rows, forbidden, err := listRows(cmd.Context(), c, selected, ns, name, len(args) == 0, time.Now())
		if err != nil {
			return err
		}
		if len(rows) == 0 && (output == outputJSON || output == outputYAML) {
			if err := printObjects(out(cmd), nil, output); err != nil {
				return err
			}
			return incomplete(nil, forbidden)
		}
		if len(rows) == 0 {
			where := "in namespace " + ns
			if ns == "" {
				where = "in any namespace"
			}
			fmt.Fprintf(errOut(cmd), "No trustplane objects found %s.\n", where)
			return incomplete(nil, forbidden)
		}
		sortRows(rows)
		if name != "" && (output == outputJSON || output == outputYAML) {
			// One object asked for by name is printed as itself, as kubectl does.
			if err := printObject(out(cmd), rows[0], output); err != nil {
				return err
			}
		} else if err := printRows(out(cmd), rows, output, ns == "", len(selected) == 1); err != nil {
			return err
		}
		return incomplete(notReady(rows), forbidden)
	}
	return cmd
}

// incomplete adds to get's outcome the kinds the user may not list: what was shown is
// not everything, and the exit status says so.
func incomplete(err error, forbidden []string) error {
	if len(forbidden) == 0 {
		return err
	}
	msg := "may not list " + strings.Join(forbidden, ", ") + " (forbidden): they are not shown"
	if err != nil {
		msg = err.Error() + "; " + msg
	}
	return errors.New(msg)
}

// notReady is get's exit status: an error (exit 1) naming how many listed objects are
// not Ready, but for those not Ready on purpose (a revoked KubeconfigRequest).
func notReady(rows []row) error {
	n := 0
	for _, r := range rows {
		if !r.settled() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d objects are not Ready", n, len(rows))
}

// listRows lists the kinds in namespace ("" every one), only the object called name when
// it is not "". Listing every kind (all), a kind the cluster does not serve is skipped,
// unless it serves none of trustplane's.
func listRows(ctx context.Context, c client.Client, selected []*kind, namespace, name string, all bool, now time.Time) (rows []row, forbidden []string, err error) {
	served := false
	for _, k := range selected {
		kr, err := listKind(ctx, c, k, namespace, now)
		switch {
		case all && errors.Is(err, errNotServed):
			continue
		case all && apierrors.IsForbidden(err):
			served = served || k.trustplane()
			forbidden = append(forbidden, k.plural())
			continue
		case err != nil:
			return nil, nil, apiError(unwrapNotServed(err), k, namespace, name)
		}
		served = served || k.trustplane()
		for _, r := range kr {
			if name == "" || r.Name == name {
				rows = append(rows, r)
			}
		}
		if name != "" && len(rows) == 0 {
			return nil, nil, apiError(notFound(k, name), k, namespace, name)
		}
	}
	if all && !served {
		return nil, nil, errors.New("the cluster serves none of trustplane's kinds: its CRDs are not installed (kubectl apply --server-side -k config/crd, or the Helm chart)")
	}
	return rows, forbidden, nil
}

// notFound is the API's NotFound error for name of kind k.
func notFound(k *kind, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: k.GVK.Group, Resource: k.plural()}, name)
}

// errNotServed marks a kind the cluster has no API for.
var errNotServed = errors.New("not served")

type notServedError struct{ err error }

func (e notServedError) Error() string        { return e.err.Error() }
func (e notServedError) Is(target error) bool { return target == errNotServed }
func (e notServedError) Unwrap() error        { return e.err }

func unwrapNotServed(err error) error {
	var ns notServedError
	if errors.As(err, &ns) {
		return ns.err
	}
	return err
}

// listKind lists one kind (in namespace, when namespaced) and makes its rows.
func listKind(ctx context.Context, c client.Client, k *kind, namespace string, now time.Time) ([]row, error) {
	list := k.newList()
	opts := append([]client.ListOption{}, k.listOptions...)
	if k.Namespaced && namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, notServedError{err}
		}
		return nil, err
	}
	rows := k.rows(list, now)
	for i := range rows {
		rows[i].Kind = k
	}
	return rows, nil
}

// getRow is one object's row; for a kind whose readiness depends on others (aggregating
// roles) the others are listed too.
func getRow(ctx context.Context, c client.Client, k *kind, namespace, name string, now time.Time) (row, error) {
	rows, _, err := listRows(ctx, c, []*kind{k}, namespace, name, false, now)
	if err != nil {
		return row{}, err
	}
	return rows[0], nil
}

// printRows writes rows as a table (one kind: its own columns; several: a DETAILS
// column), or as a List in JSON or YAML. withNamespace adds the NAMESPACE column.
func printRows(w io.Writer, rows []row, output string, withNamespace, oneKind bool) error {
	switch output {
	case outputJSON, outputYAML:
		return printObjects(w, rows, output)
	}
	wide := output == outputWide
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var header []string
	if withNamespace {
		header = append(header, "NAMESPACE")
	}
	header = append(header, "NAME", "READY", "REASON")
	if oneKind {
		for _, c := range rows[0].Kind.Columns {
			if !c.Wide || wide {
				header = append(header, c.Header)
			}
		}
	}
	header = append(header, "AGE")
	if !oneKind {
		header = append(header, "DETAILS")
	}
	if wide {
		header = append(header, "MESSAGE")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	now := time.Now()
	for _, r := range rows {
		var cells []string
		if withNamespace {
			cells = append(cells, r.Namespace) // empty for cluster-scoped objects
		}
		name := r.Name
		if !oneKind {
			name = r.Kind.Name + "/" + r.Name
		}
		cells = append(cells, name, string(r.Ready), orNone(r.Reason))
		if oneKind {
			for i, c := range r.Kind.Columns {
				if !c.Wide || wide {
					cells = append(cells, fact(r, i, c, wide))
				}
			}
		}
		cells = append(cells, age(r.Created, now))
		if !oneKind {
			var details []string
			for i, c := range r.Kind.Columns {
				if !c.Wide {
					details = append(details, strings.ReplaceAll(strings.ToLower(c.Header), " ", "-")+"="+fact(r, i, c, wide))
				}
			}
			cells = append(cells, strings.Join(details, " "))
		}
		if wide {
			cells = append(cells, strings.ReplaceAll(r.Message, "\n", " "))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func fact(r row, i int, c column, wide bool) string {
	if i >= len(r.Facts) {
		return "<none>"
	}
	v := r.Facts[i]
	if c.Short {
		return shortID(v, wide)
	}
	return orNone(v)
}

func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// printObject writes one row's object as printObjects writes each.
func printObject(w io.Writer, r row, output string) error {
	return printerFor(output).PrintObj(shown(r), w)
}

func printerFor(output string) printers.ResourcePrinter {
	if output == outputYAML {
		return &printers.YAMLPrinter{}
	}
	return &printers.JSONPrinter{}
}

// shown is a row's object as printed: its kind set, without managed fields and without a
// credential.
func shown(r row) client.Object {
	obj := r.Object.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(r.Kind.GVK)
	obj.SetManagedFields(nil)
	if kr, ok := obj.(*operatorv1alpha1.KubeconfigRequest); ok {
		kr.Status.Kubeconfig = ""
	}
	return obj
}

// printObjects writes the rows' objects as a v1 List, as kubectl does, without managed
// fields and without what is a credential (a KubeconfigRequest's issued kubeconfig:
// `trustplane kubeconfig` writes that).
func printObjects(w io.Writer, rows []row, output string) error {
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: []runtime.RawExtension{}}
	for _, r := range rows {
		list.Items = append(list.Items, runtime.RawExtension{Object: shown(r)})
	}
	return printerFor(output).PrintObj(list, w)
}
