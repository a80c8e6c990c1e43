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
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

func newChecksumCommand() *cobra.Command {
	return day2Group("checksum", "Tengine-Ingress secret consistency: compare the cluster's Secrets and Ingresses with the published checksums", newChecksumDiffCommand())
}

func newChecksumDiffCommand() *cobra.Command {
	var namespaces, tracks []string
	var all bool
	versionAnnotation := checksum.DefaultVersionAnnotation
	classes := checksum.DefaultIngressClassOptions()
	cmd := &cobra.Command{
		Use:   "diff [--namespace NS ...]",
		Short: "Compute the IDs and checksum as Tengine-Ingress would and show how they differ from the published ones; exit 1 on a mismatch",
		Long: `Compute, from the cluster's Secrets and Ingresses, the IDs and the checksum a
Tengine-Ingress watching the same namespaces would compute (--namespace, repeated or
comma-separated, as its --watch-namespace; none: every namespace, its default), compare
them with the SecretCheckSums and IngressCheckSums of that scope as its ingCheck does,
and print each differing ID with the Secret or Ingress it belongs to and why: a version
or certificate changed, an object left out (and the reason), one not published yet, one
gone. The exit status is 1 when a track does not match. Certificates and keys are read
to compute the IDs and never printed.

Give the class flags your Tengine-Ingress runs with (--ingress-class, --controller-class,
--watch-ingress-without-class, --ingress-class-by-name, --ignore-ingress-class): they
decide which Ingresses count.`,
		Example: examples(
			"checksum diff                      # every namespace, as Tengine-Ingress without --watch-namespace",
			"checksum diff --namespace web      # as Tengine-Ingress --watch-namespace=web",
			"checksum diff --tracks secrets --version-annotation fs.ingress.alibaba/version",
		),
		Args: cobra.NoArgs,
	}
	f := newClientFlags(cmd, false, false)
	cmd.Flags().StringSliceVarP(&namespaces, "namespace", "n", nil, "Namespaces the data plane watches (repeat or comma-separate); none: every namespace.")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Every namespace (the default without --namespace).")
	cmd.Flags().StringSliceVar(&tracks, "tracks", []string{string(checksum.TrackSecrets), string(checksum.TrackIngresses)}, "What to compare: secrets, ingresses or both.")
	cmd.Flags().StringVar(&versionAnnotation, "version-annotation", versionAnnotation, "Annotation the versions are read from (Tengine-Ingress's).")
	classes.AddFlags(cmd.Flags(), "")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if all && len(namespaces) > 0 {
			return errors.New("--all-namespaces and --namespace are mutually exclusive")
		}
		for _, t := range tracks {
			if checksum.Track(t).Kind() == "" {
				return fmt.Errorf("unknown track %q in --tracks: use secrets, ingresses or both", t)
			}
		}
		c, _, err := f.connect(errOut(cmd)) // the namespaces are --namespace's, as Tengine-Ingress's
		if err != nil {
			return err
		}
		scope := checksum.NewScope(namespaces, versionAnnotation)
		var results []trackResult
		for _, t := range tracks {
			result, err := diffTrack(cmd.Context(), c, checksum.Track(t), scope, classes)
			if err != nil {
				return err
			}
			results = append(results, result)
		}
		fmt.Fprintf(out(cmd), "Scope: %s\n", scope)
		mismatches := 0
		for _, result := range results {
			fmt.Fprintln(out(cmd))
			if err := writeTrackResult(out(cmd), result, time.Now()); err != nil {
				return err
			}
			if !result.Verdict.Trusted {
				mismatches++
			}
		}
		if mismatches > 0 {
			return fmt.Errorf("%d of %d tracks do not match the published checksum", mismatches, len(tracks))
		}
		return nil
	}
	return cmd
}

// trackResult is one track compared with what is published for the scope.
type trackResult struct {
	Track checksum.Track
	// Verdict is Tengine-Ingress's (dataplane.Decide, fail-closed: nothing published is
	// no match).
	Verdict dataplane.Verdict
	// Against is the object the verdict names.
	Against     dataplane.Published
	IDs         int
	Differences []checksum.Difference
	ObjectKind  string
}

// diffTrack lists a track's objects and published checksums in scope and compares them.
func diffTrack(ctx context.Context, c client.Client, track checksum.Track, scope checksum.Scope, classes checksum.IngressClassOptions) (trackResult, error) {
	// What is published first: a cluster without the CRDs is told so before anything else.
	published, err := publishedChecksums(ctx, c, track, scope)
	if err != nil {
		return trackResult{}, err
	}
	var locals []checksum.Local
	kindName := "Secret"
	if track == checksum.TrackSecrets {
		locals, err = secretLocals(ctx, c, scope)
	} else {
		kindName = "Ingress"
		locals, err = ingressLocals(ctx, c, scope, classes)
	}
	if err != nil {
		return trackResult{}, err
	}
	var ids []string
	for _, l := range locals {
		if l.ID != "" {
			ids = append(ids, l.ID)
		}
	}
	r := trackResult{Track: track, Verdict: dataplane.Decide(scope.String(), ids, published, false), IDs: len(ids), ObjectKind: kindName}
	for _, p := range published {
		if p.Name == r.Verdict.Against {
			r.Against = p
		}
	}
	if r.Verdict.Reason == dataplane.Mismatch && !r.Verdict.IDsOmitted {
		r.Differences = checksum.Explain(r.Verdict.LocalOnly, r.Verdict.PublishedOnly, locals)
	}
	return r, nil
}

// inScope lists objects of the scope's namespaces (every one when it covers all).
func inScope(ctx context.Context, c client.Client, scope checksum.Scope, list client.ObjectList, each func()) error {
	if scope.AllNamespaces() {
		if err := c.List(ctx, list); err != nil {
			return err
		}
		each()
		return nil
	}
	for _, ns := range scope.Namespaces {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		each()
	}
	return nil
}

// secretLocals are the scope's Secrets as the checksum counts them (data read to compute
// the IDs, never kept or printed).
func secretLocals(ctx context.Context, c client.Client, scope checksum.Scope) ([]checksum.Local, error) {
	var out []checksum.Local
	list := &corev1.SecretList{}
	err := inScope(ctx, c, scope, list, func() {
		for i := range list.Items {
			s := &list.Items[i]
			id, err := checksum.SecretID(s.Name, s.Annotations, scope.VersionAnnotation, s.Data)
			l := local(s.Namespace+"/"+s.Name, id, err)
			if l.LeftOut != nil {
				l.PemSHA, _ = checksum.SecretPemSHA(s.Data)
			}
			out = append(out, l)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing Secrets: %w", oneLine(err))
	}
	return out, nil
}

// ingressLocals are the scope's Ingresses as a Tengine-Ingress with these class flags
// counts them.
func ingressLocals(ctx context.Context, c client.Client, scope checksum.Scope, classes checksum.IngressClassOptions) ([]checksum.Local, error) {
	known := map[string]string{}
	if !classes.IgnoreIngressClass {
		ics := &networkingv1.IngressClassList{}
		if err := c.List(ctx, ics); err != nil {
			if apierrors.IsForbidden(err) {
				return nil, errors.New("listing IngressClasses is forbidden: give --ignore-ingress-class if your Tengine-Ingress may not list them either")
			}
			return nil, fmt.Errorf("listing IngressClasses: %w", oneLine(err))
		}
		for _, ic := range ics.Items {
			known[ic.Name] = ic.Spec.Controller
		}
	}
	lookup := func(name string) (string, bool) { ctl, ok := known[name]; return ctl, ok }
	var out []checksum.Local
	list := &networkingv1.IngressList{}
	err := inScope(ctx, c, scope, list, func() {
		for i := range list.Items {
			ing := &list.Items[i]
			id, err := classes.IngressIDOfClass(ing.Name, ing.Annotations, ing.Spec.IngressClassName, scope.VersionAnnotation, lookup)
			out = append(out, local(ing.Namespace+"/"+ing.Name, id, err))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing Ingresses: %w", oneLine(err))
	}
	return out, nil
}

func local(object, id string, err error) checksum.Local {
	if l, ok := checksum.IsLeftOut(err); ok {
		return checksum.Local{Object: object, LeftOut: l}
	}
	return checksum.Local{Object: object, ID: id}
}

// publishedChecksums are the track's checksum objects a data plane of the scope sees.
func publishedChecksums(ctx context.Context, c client.Client, track checksum.Track, scope checksum.Scope) ([]dataplane.Published, error) {
	var list client.ObjectList = &tenginev1.SecretCheckSumList{}
	if track == checksum.TrackIngresses {
		list = &tenginev1.IngressCheckSumList{}
	}
	var out []dataplane.Published
	err := inScope(ctx, c, scope, list, func() {
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			var sum string
			var ids []string
			switch o := it.(type) {
			case *tenginev1.SecretCheckSum:
				sum, ids = o.Spec.Checksum, o.Spec.IDs
			case *tenginev1.IngressCheckSum:
				sum, ids = o.Spec.Checksum, o.Spec.IDs
			}
			o := it.(client.Object)
			_, omitted := o.GetAnnotations()[tenginev1alpha1.IDsOmittedAnnotation]
			out = append(out, dataplane.Published{Name: o.GetNamespace() + "/" + o.GetName(), Checksum: sum, IDs: ids, Created: o.GetCreationTimestamp().Time,
				Scope: o.GetAnnotations()[tenginev1alpha1.ScopeAnnotation], IDsOmitted: omitted})
		}
	})
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("the cluster does not serve %ss (%s): their CRDs are not installed", track.Kind(), tenginev1.GroupVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("listing %ss: %w", track.Kind(), oneLine(err))
	}
	return out, nil
}

// writeTrackResult words one track's comparison: a match, or why not and each differing ID.
func writeTrackResult(w io.Writer, r trackResult, now time.Time) error {
	title := strings.ToUpper(string(r.Track[:1])) + string(r.Track[1:])
	v := r.Verdict
	against := ""
	if v.Against != "" {
		against = fmt.Sprintf("%s %s (published %s)", r.Track.Kind(), v.Against, when(r.Against.Created, now))
	}
	switch v.Reason {
	case dataplane.Match:
		_, err := fmt.Fprintf(w, "%s: match: checksum %s of %d IDs is published in %s\n", title, v.Checksum, r.IDs, against)
		return err
	case dataplane.NoChecksumFailClosed, dataplane.NoChecksumFailOpen:
		_, err := fmt.Fprintf(w, "%s: MISMATCH: no %s is published in this scope (the cluster's checksum is %s of %d IDs); is the secret-checksum controller publishing here (--secret-checksum-scopes, --secret-checksum-namespaces)?\n",
			title, r.Track.Kind(), v.Checksum, r.IDs)
		return err
	case dataplane.ScopeMismatch:
		_, err := fmt.Fprintf(w, "%s: MISMATCH: no published %s covers this scope; the newest, %s, covers %q. Publish one for this scope (trustplane manager --secret-checksum-scopes, --secret-checksum-namespaces) or compare with the namespaces it covers\n",
			title, r.Track.Kind(), against, v.AgainstScope)
		return err
	}
	if v.IDsOmitted {
		_, err := fmt.Fprintf(w, "%s: MISMATCH with %s: the cluster's checksum is %s of %d IDs, published %s; the published object left its IDs out (too many to publish), so the differing IDs are unknown\n",
			title, against, v.Checksum, r.IDs, r.Against.Checksum)
		return err
	}
	fmt.Fprintf(w, "%s: MISMATCH with %s: the cluster's checksum is %s of %d IDs, published %s of %d IDs\n",
		title, against, v.Checksum, r.IDs, r.Against.Checksum, len(r.Against.IDs))
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintf(tw, "ID\tONLY IN\t%s\tWHY\n", strings.ToUpper(r.ObjectKind))
	for _, d := range r.Differences {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.ID, d.Side, orNone(strings.Join(d.Objects, ",")), d.Why)
	}
	return tw.Flush()
}
