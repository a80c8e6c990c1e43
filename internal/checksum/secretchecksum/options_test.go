package secretchecksum

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOptionsSayWhatIsWrong(t *testing.T) {
	for args, want := range map[string]string{
		"--secret-checksum-label-selector=team=a":                                          "was removed",
		"--secret-checksum-scopes=everything":                                              `"everything" is neither cluster nor namespace`,
		"--secret-checksum-publish-namespace=":                                             "--secret-checksum-publish-namespace is required",
		"--secret-checksum-namespaces=web,api --secret-checksum-publish-namespace=ops":     "is not among --secret-checksum-namespaces",
		"--secret-checksum-max-object-bytes=10":                                            "too small",
		"--secret-checksum-scopes=namespace --secret-checksum-publish-namespace=":          "",
		"--secret-checksum-namespaces=web,api --secret-checksum-publish-namespace=web":     "",
		"--secret-checksum-scopes=cluster,namespace --secret-checksum-namespaces=web":      "is not among",
		"--secret-checksum-scopes=cluster,namespace --secret-checksum-publish-namespace=x": "",
		"--secret-checksum-ingress-class=" + strings.Repeat("x", 254):                      "an ingress class is at most 253",
		"--secret-checksum-ingress-class=internal --secret-checksum-watch-ingress-without-class --secret-checksum-ingress-class-by-name " +
			"--secret-checksum-controller-class=example.com/gw --secret-checksum-ignore-ingress-class": "",
	} {
		opts := DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		opts.AddFlags(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		err := opts.Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", args, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error saying %q", args, err, want)
		}
	}
}
