package usercli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/atomicfile"
)

// kubeconfigKind is the KubeconfigRequest entry of kinds.
func kubeconfigKind() *kind {
	k, _ := kindNamed("kubeconfigrequest")
	return k
}

func newKubeconfigCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "kubeconfig NAME",
		Short: "Write the kubeconfig a KubeconfigRequest issued to a file (mode 0600) or stdout",
		Long: `Write the kubeconfig a KubeconfigRequest issued, decoded, to FILE (created or replaced
with mode 0600) or, without -o, to stdout. A request that is not Ready, is revoked, or
whose credential has expired is refused with the reason: no file is written.`,
		Example: examples(
			"kubeconfig reader -n team-a -o reader.kubeconfig",
			"kubectl --kubeconfig <({tp} kubeconfig reader -n team-a) get pods",
		),
		Args:    cobra.ExactArgs(1),
		GroupID: GroupDay2,
	}
	f := newClientFlags(cmd, false, true)
	cmd.Flags().StringVarP(&file, "output", "o", "", "File to write (mode 0600); stdout when empty or -.")
	cmd.ValidArgsFunction = completeNamesOf(f, kubeconfigKind())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		_, kr, err := getKubeconfigRequest(cmd, f, args[0])
		if err != nil {
			return err
		}
		raw, err := issuedKubeconfig(kr, time.Now())
		if err != nil {
			return err
		}
		if file == "" || file == "-" {
			_, err := out(cmd).Write(raw)
			return err
		}
		if err := atomicfile.WriteFile(file, raw, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
		// An identical file is left alone by WriteFile, whatever its mode.
		if err := os.Chmod(file, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(errOut(cmd), "wrote the kubeconfig of KubeconfigRequest %s/%s (Cluster %s, expires %s) to %s\n",
			kr.Namespace, kr.Name, kr.ClusterKey(), when(metaTime(kr.Status.ExpirationTimestamp), time.Now()), file)
		return nil
	}
	return cmd
}

// getKubeconfigRequest reads the request named name in the namespace of the flags, with
// the client it was read through.
func getKubeconfigRequest(cmd *cobra.Command, f *clientFlags, name string) (client.Client, *operatorv1alpha1.KubeconfigRequest, error) {
	c, ns, err := f.connect(errOut(cmd))
	if err != nil {
		return nil, nil, err
	}
	kr := &operatorv1alpha1.KubeconfigRequest{}
	if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: name}, kr); err != nil {
		return nil, nil, apiError(err, kubeconfigKind(), ns, name)
	}
	return c, kr, nil
}

// issuedKubeconfig is the kubeconfig a request issued, decoded, or why it may not be
// used: not Ready, revoked, expired, none yet, or not a kubeconfig.
func issuedKubeconfig(kr *operatorv1alpha1.KubeconfigRequest, now time.Time) ([]byte, error) {
	name := kr.Namespace + "/" + kr.Name
	ready := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready)
	switch {
	case kr.Annotations[operatorv1alpha1.RevokeAnnotation] == "true" || ready != nil && ready.Reason == operatorv1alpha1.ReasonRevoked:
		return nil, fmt.Errorf("KubeconfigRequest %s is revoked (annotation %s): its credential is invalid", name, operatorv1alpha1.RevokeAnnotation)
	case ready == nil:
		return nil, fmt.Errorf("KubeconfigRequest %s is not Ready: not reconciled yet", name)
	case ready.Status != metav1.ConditionTrue:
		return nil, fmt.Errorf("KubeconfigRequest %s is not Ready: %s: %s", name, ready.Reason, ready.Message)
	case kr.Status.ExpirationTimestamp != nil && !now.Before(kr.Status.ExpirationTimestamp.Time):
		return nil, fmt.Errorf("KubeconfigRequest %s: the issued kubeconfig expired %s", name, when(kr.Status.ExpirationTimestamp.Time, now))
	case kr.Status.Kubeconfig == "":
		return nil, fmt.Errorf("KubeconfigRequest %s has no kubeconfig in its status yet", name)
	}
	raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("KubeconfigRequest %s: status.kubeconfig is not base64", name)
	}
	if _, err := clientcmd.Load(raw); err != nil {
		return nil, fmt.Errorf("KubeconfigRequest %s: status.kubeconfig is not a kubeconfig", name)
	}
	return raw, nil
}

// annotate merge-patches one annotation of obj.
func annotate(ctx context.Context, c client.Client, obj client.Object, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// waitFor polls obj until done says so (nil) or timeout passes; done's last error says
// what was awaited.
func waitFor(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration, done func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := client.ObjectKeyFromObject(obj)
	for {
		if err := c.Get(ctx, key, obj); err != nil {
			if ctx.Err() != nil {
				break
			}
			return oneLine(err)
		}
		last := done()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %v: %w", timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("timed out after %v", timeout)
}

func newRotateCommand() *cobra.Command { return newCredentialCommand(true) }
func newRevokeCommand() *cobra.Command { return newCredentialCommand(false) }

// newCredentialCommand is rotate (a new credential now) or revoke (invalidate it now):
// each sets the KubeconfigRequest annotation the kubeconfig controller acts on.
func newCredentialCommand(rotate bool) *cobra.Command {
	verb, annotation := "revoke", operatorv1alpha1.RevokeAnnotation
	short := "Revoke a KubeconfigRequest's credential now (annotation " + annotation + "); --wait for the controller to confirm"
	if rotate {
		verb, annotation = "rotate", operatorv1alpha1.RotateAnnotation
		short = "Issue a new credential for a KubeconfigRequest now (annotation " + annotation + "); --wait for it"
	}
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:     verb + " kubeconfigrequest NAME",
		Short:   short,
		Example: examples(verb+" kubeconfigrequest reader -n team-a --wait", verb+" kcr reader -n team-a"),
		Args:    cobra.ExactArgs(2),
		GroupID: GroupDay2,
	}
	f := newClientFlags(cmd, false, true)
	cmd.Flags().BoolVar(&wait, "wait", false, "Wait for the kubeconfig controller's outcome.")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long --wait waits.")
	cmd.ValidArgsFunction = completeKindAndName(f, []*kind{kubeconfigKind()})
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if k, err := kindNamed(args[0]); err != nil {
			return err
		} else if k != kubeconfigKind() {
			return fmt.Errorf("only a kubeconfigrequest can be %sd, not a %s", verb, k.Name)
		}
		c, kr, err := getKubeconfigRequest(cmd, f, args[1])
		if err != nil {
			return err
		}
		ns := kr.Namespace
		if rotate && kr.Annotations[operatorv1alpha1.RevokeAnnotation] == "true" {
			return fmt.Errorf("KubeconfigRequest %s/%s is revoked: set %s to \"false\" to issue a new kubeconfig", ns, kr.Name, operatorv1alpha1.RevokeAnnotation)
		}
		before := kr.Status.Kubeconfig
		if err := annotate(cmd.Context(), c, kr, annotation, "true"); err != nil {
			return apiError(err, kubeconfigKind(), ns, kr.Name)
		}
		name := "kubeconfigrequest/" + kr.Name
		if !wait {
			fmt.Fprintf(out(cmd), "%s: %s requested\n", name, verb)
			return nil
		}
		err = waitFor(cmd.Context(), c, kr, timeout, func() error {
			ready := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready)
			switch {
			case ready == nil:
				return errors.New("not reconciled yet")
			case !rotate && ready.Status == metav1.ConditionFalse && ready.Reason == operatorv1alpha1.ReasonRevoked:
				return nil
			case rotate && kr.Annotations[annotation] != "true" && ready.Status == metav1.ConditionTrue && kr.Status.Kubeconfig != before:
				return nil
			}
			return fmt.Errorf("still Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if rotate {
			fmt.Fprintf(out(cmd), "%s: rotated; new credential issued %s, expires %s\n", name,
				when(metaTime(kr.Status.IssuedAt), time.Now()), when(metaTime(kr.Status.ExpirationTimestamp), time.Now()))
		} else {
			fmt.Fprintf(out(cmd), "%s: revoked\n", name)
		}
		return nil
	}
	return cmd
}
