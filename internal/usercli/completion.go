package usercli

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// completeKindAndName completes KIND (only the kinds in only, when not nil) and then
// NAME: the names of that kind in the namespace the flags select, read from the cluster.
// A cluster that cannot be reached completes nothing.
func completeKindAndName(f *clientFlags, only []*kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			var out []cobra.Completion
			for _, k := range kinds {
				if only == nil || contains(only, k) {
					if strings.HasPrefix(k.Name, toComplete) {
						out = append(out, cobra.CompletionWithDesc(k.Name, k.Kind+" ("+k.System+")"))
					}
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		case 1:
			k, err := kindNamed(strings.Split(args[0], ",")[0])
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeNames(cmd, f, k, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamesOf completes the first argument with the names of objects of kind k.
func completeNamesOf(f *clientFlags, k *kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeNames(cmd, f, k, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func completeNames(cmd *cobra.Command, f *clientFlags, k *kind, prefix string) []cobra.Completion {
	c, ns, err := f.connect(io.Discard)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
	defer cancel()
	rows, err := listKind(ctx, c, k, ns, time.Now())
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, r := range rows {
		if strings.HasPrefix(r.Name, prefix) {
			out = append(out, r.Name)
		}
	}
	return out
}

// completeFlagNames completes a flag's value with the names of objects of kind k.
func completeFlagNames(f *clientFlags, k *kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completeNames(cmd, f, k, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completePods completes the first argument with the names of the namespace's pods.
func completePods(f *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, ns, err := f.connect(io.Discard)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
		defer cancel()
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, toComplete) {
				out = append(out, p.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func contains(ks []*kind, k *kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
