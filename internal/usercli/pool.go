package usercli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// credentialsBindingGVK is Gardener's CredentialsBinding, the entry of a garden's pool.
var credentialsBindingGVK = schema.GroupVersionKind{Group: "security.gardener.cloud", Version: "v1alpha1", Kind: "CredentialsBinding"}

// poolFlags say where the pool is: its namespace (-n) and whether its entries are
// labelled Secrets (the Secret pool) or the garden's CredentialsBindings.
type poolFlags struct {
	garden bool
}

func (p *poolFlags) gvk() schema.GroupVersionKind {
	if p.garden {
		return credentialsBindingGVK
	}
	return corev1.SchemeGroupVersion.WithKind("Secret")
}

func newPoolCommand() *cobra.Command {
	return day2Group("pool", "See and hand back the hyperscaler credentials of the subscription pool", newPoolListCommand(), newPoolCleanCommand())
}

// poolEntries lists the pool's entries (their metadata) in ns.
func poolEntries(ctx context.Context, c client.Client, p *poolFlags, ns string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	gvk := p.gvk()
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(ns), client.HasLabels{cp.LabelHyperscalerType}); err != nil {
		return nil, fmt.Errorf("listing the pool's %ss in %s: %w", gvk.Kind, ns, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// poolState is what an entry is to the pool, as the subscription controller reads its
// labels: dirty, internal, shared, claimed or free.
func poolState(l map[string]string) string {
	switch {
	case l[cp.LabelDirty] == "true":
		return "dirty"
	case l[cp.LabelInternal] == "true":
		return "internal"
	case l[cp.LabelShared] == "true":
		return "shared"
	}
	if _, claimed := l[cp.LabelTenantName]; claimed {
		return "claimed"
	}
	return "free"
}

func newPoolListCommand() *cobra.Command {
	p := &poolFlags{}
	cmd := &cobra.Command{
		Use:   "list -n NAMESPACE [--garden]",
		Short: "List the pool's credentials: type, state (free, claimed, shared, internal, dirty), account and claiming namespace",
		Long: `List the credentials of the subscription pool in a namespace: the labelled Secrets of the
Secret pool (--subscription-pool-namespace of trustplane manager), or, with --garden and a
kubeconfig of the garden, the CredentialsBindings of the Gardener project namespace. Each
with its hyperscalerType, its state as the subscription controller reads its labels, the
global account it is claimed for (tenantName), the namespace that claimed it and whether
it is EU access. Only metadata is read: never a credential.`,
		Example: examples("pool list -n kcp-system", "pool list -n garden-kyma --garden --kubeconfig garden.kubeconfig"),
		Args:    cobra.NoArgs,
	}
	f := newClientFlags(cmd, false, true)
	cmd.Flags().BoolVar(&p.garden, "garden", false, "The pool is the garden's CredentialsBindings (a Gardener project namespace), not labelled Secrets.")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, ns, err := f.connect(errOut(cmd))
		if err != nil {
			return err
		}
		entries, err := poolEntries(cmd.Context(), c, p, ns)
		if err != nil {
			return oneLine(err)
		}
		w := tabwriter.NewWriter(out(cmd), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tTYPE\tSTATE\tACCOUNT\tCLAIMED BY\tEU ACCESS")
		for _, e := range entries {
			l := e.Labels
			claimedBy, _, _ := strings.Cut(e.Annotations[cp.AnnotationClaimedBy], "/")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, l[cp.LabelHyperscalerType], poolState(l), orDash(l[cp.LabelTenantName]), orDash(claimedBy), orDash(l[cp.LabelEUAccess]))
		}
		return w.Flush()
	}
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newPoolCleanCommand() *cobra.Command {
	p := &poolFlags{}
	var all, free bool
	cmd := &cobra.Command{
		Use:   "clean -n NAMESPACE (NAME... | --all-dirty) [--free] [--garden]",
		Short: "Hand dirty credentials back once their hyperscaler accounts are cleaned",
		Long: `Hand dirty credentials of the pool back, once the hyperscaler accounts behind them are
cleaned: the label dirty is removed, so the global account they are labelled for
(tenantName) may use them again; with --free also tenantName and the claim record, so any
account may claim them. Only dirty credentials are touched: a named one that is not dirty
is an error, and nothing is changed before every named one is found dirty. Waiting
SubscriptionRequests are brought back by the change.`,
		Example: examples("pool clean -n kcp-system aws-17 aws-18", "pool clean -n garden-kyma --garden --all-dirty --free"),
	}
	f := newClientFlags(cmd, false, true)
	cmd.Flags().BoolVar(&p.garden, "garden", false, "The pool is the garden's CredentialsBindings (a Gardener project namespace), not labelled Secrets.")
	cmd.Flags().BoolVar(&all, "all-dirty", false, "Hand back every dirty credential of the namespace.")
	cmd.Flags().BoolVar(&free, "free", false, "Also remove tenantName and the claim record: any global account may claim them.")
	cmd.RunE = func(cmd *cobra.Command, names []string) error {
		if all == (len(names) > 0) {
			return errors.New("name the credentials to hand back, or give --all-dirty (not both)")
		}
		c, ns, err := f.connect(errOut(cmd))
		if err != nil {
			return err
		}
		entries, err := poolEntries(cmd.Context(), c, p, ns)
		if err != nil {
			return oneLine(err)
		}
		chosen, err := dirtyEntries(entries, names, all)
		if err != nil {
			return err
		}
		for _, e := range chosen {
			if err := handBack(cmd.Context(), c, p, e, free); err != nil {
				return oneLine(fmt.Errorf("handing back %s: %w", e.Name, err))
			}
			fmt.Fprintf(out(cmd), "%s: handed back%s\n", e.Name, map[bool]string{true: " and freed for any account", false: " to account " + orDash(e.Labels[cp.LabelTenantName])}[free])
		}
		if len(chosen) == 0 {
			fmt.Fprintf(out(cmd), "no dirty credential in %s\n", ns)
		}
		return nil
	}
	return cmd
}

// dirtyEntries are the entries named (or all dirty ones), refusing a name that is not a
// dirty entry of the pool before anything changes.
func dirtyEntries(entries []metav1.PartialObjectMetadata, names []string, all bool) ([]metav1.PartialObjectMetadata, error) {
	byName := map[string]metav1.PartialObjectMetadata{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	var out []metav1.PartialObjectMetadata
	if all {
		for _, e := range entries {
			if e.Labels[cp.LabelDirty] == "true" {
				out = append(out, e)
			}
		}
		return out, nil
	}
	for _, n := range names {
		e, ok := byName[n]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s is not a credential of the pool (no %s label)", n, cp.LabelHyperscalerType)
		case e.Labels[cp.LabelDirty] != "true":
			return nil, fmt.Errorf("%s is %s, not dirty: nothing to hand back", n, poolState(e.Labels))
		}
		out = append(out, e)
	}
	return out, nil
}

// handBack removes dirty (and with free, tenantName and the claim record) with a patch
// at the version read: a credential changed since is not touched blindly.
func handBack(ctx context.Context, c client.Client, p *poolFlags, e metav1.PartialObjectMetadata, free bool) error {
	labels := map[string]any{cp.LabelDirty: nil}
	metadata := map[string]any{"resourceVersion": e.ResourceVersion, "labels": labels}
	if free {
		labels[cp.LabelTenantName] = nil
		metadata["annotations"] = map[string]any{cp.AnnotationClaimedBy: nil}
	}
	patch, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name}}
	obj.SetGroupVersionKind(p.gvk())
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}
