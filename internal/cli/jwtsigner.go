package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/trustplane/trustplane/internal/configfile"
	"github.com/trustplane/trustplane/internal/jwks/jwtsigner"
)

func newJWTSignerCommand() (*cobra.Command, *configfile.Schema) {
	opts := jwtsigner.DefaultOptions()
	schema := &configfile.Schema{Kind: "JWTSignerConfiguration", Command: "trustplane jwt-signer"}
	cmd := clusterCommand("jwt-signer",
		"kube-apiserver's external service account token signer (--service-account-signing-endpoint): signs with one JWKSConfig's signing key, only once it is published, and serves its published set", schema,
		opts.Validate, // a pointer receiver, as for node-agent
		func(ctx context.Context, cfg *rest.Config) error { return jwtsigner.Run(ctx, cfg, opts) })
	section(cmd, schema, "", "The signer.", opts.AddFlags)
	return cmd, schema
}
