package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// An image to build: its root file system and how it runs.
type image struct {
	// name is the last part of the image's repository (ghcr.io/trustplane/<name>).
	name       string
	entries    []entry
	user       string
	entrypoint []string
	env        []string
	ports      []string
	stopSignal string
	// goBinaries are the entries built by Go (their modules go into the SBOM);
	// debianFiles the ones copied from this machine's Debian packages.
	goBinaries  []string
	debianFiles []string
	description string
}

// trustplaneImage is the one static binary, run as the unprivileged user 65532, with the
// CA certificates of Debian's ca-certificates for the public endpoints it reaches
// (Gardener, OIDC issuers).
func trustplaneImage(binary string) image {
	const caBundle = "/etc/ssl/certs/ca-certificates.crt"
	entries := append(users("nonroot", 65532),
		copied("/usr/local/bin/trustplane", binary, 0o755),
		copied(caBundle, caBundle, 0o644),
		dir("/tmp", 0o1777),
	)
	return image{
		name: "trustplane", entries: entries, user: "65532:65532",
		entrypoint:  []string{"/usr/local/bin/trustplane"},
		env:         []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + caBundle},
		goBinaries:  []string{binary},
		debianFiles: []string{caBundle},
		description: "trustplane: every controller, agent and server of the project in one static binary",
	}
}

// pauseImage is the sandbox image of make run's node (hack/images/pause).
func pauseImage(binary string) image {
	return image{
		name: "pause", entries: []entry{copied("/pause", binary, 0o755)}, user: "65535:65535",
		entrypoint: []string{"/pause"}, goBinaries: []string{binary},
		description: "the pod sandbox of make run's node: holds a pod's namespaces, reaps orphans",
	}
}

// nginxConf runs nginx as the JWKS Deployments need it (internal/jwks): as a
// non-root user on a read-only root file system, everything it writes under /tmp (an
// emptyDir), logs to the container's output, and the server blocks from
// /etc/nginx/conf.d, where the Deployment mounts its ConfigMap — the layout of
// nginxinc/nginx-unprivileged, which the Deployments ran before.
const nginxConf = `worker_processes auto;
error_log /dev/stderr notice;
pid /tmp/nginx.pid;

events {
    worker_connections 1024;
}

http {
    client_body_temp_path /tmp/client_temp;
    proxy_temp_path       /tmp/proxy_temp;
    fastcgi_temp_path     /tmp/fastcgi_temp;
    uwsgi_temp_path       /tmp/uwsgi_temp;
    scgi_temp_path        /tmp/scgi_temp;

    include      /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log   /dev/stdout;
    sendfile     on;
    keepalive_timeout 65;
    server_tokens off;

    include /etc/nginx/conf.d/*.conf;
}
`

// nginxImage is Debian's nginx (the nginx package installed on this machine) with the
// shared libraries it links, run as uid 101 listening where conf.d says (8080 for JWKS).
func nginxImage() (image, error) {
	const binary = "/usr/sbin/nginx"
	libs, err := sharedLibraries(binary)
	if err != nil {
		return image{}, err
	}
	entries := append(users("nginx", 101),
		copied(binary, binary, 0o755),
		file("/etc/nginx/nginx.conf", nginxConf),
		copied("/etc/nginx/mime.types", "/etc/nginx/mime.types", 0o644),
		dir("/etc/nginx/conf.d", 0o755),
		dir("/usr/share/nginx/html", 0o755),
		// nginx opens its compiled-in log before it reads nginx.conf.
		symlink("/var/log/nginx/error.log", "/dev/stderr"),
		symlink("/var/log/nginx/access.log", "/dev/stdout"),
		dir("/tmp", 0o1777),
	)
	debianFiles := []string{binary, "/etc/nginx/mime.types"}
	for _, lib := range libs {
		// The real file under the name the binary asks for: no symbolic links to follow.
		entries = append(entries, copied(lib, lib, 0o755))
		debianFiles = append(debianFiles, lib)
	}
	return image{
		name: "jwks-nginx", entries: entries, user: "101:101",
		entrypoint: []string{binary, "-g", "daemon off;"},
		env:        []string{"PATH=/usr/sbin:/usr/bin:/bin"},
		ports:      []string{"8080/tcp"}, stopSignal: "SIGQUIT",
		debianFiles: debianFiles,
		description: "Debian's nginx, unprivileged, for the JWKS Deployments (and a data-plane gateway)",
	}, nil
}

var lddLine = regexp.MustCompile(`^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$`)

// sharedLibraries are the files ldd says binary loads, the dynamic loader included.
func sharedLibraries(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", binary, err)
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := lddLine.FindStringSubmatch(sc.Text()); m != nil {
			libs = append(libs, m[1])
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s named no library", binary)
	}
	return libs, nil
}

// requireFiles says which of an image's files from this machine are missing, with the
// package to install.
func requireFiles(img image) error {
	for _, e := range img.entries {
		if e.source == "" {
			continue
		}
		if _, err := os.Stat(e.source); err != nil {
			hint := ""
			if strings.HasPrefix(e.source, "/usr/sbin/nginx") || strings.HasPrefix(e.source, "/etc/nginx") {
				hint = " (apt-get install nginx)"
			} else if strings.HasPrefix(e.source, "/etc/ssl") {
				hint = " (apt-get install ca-certificates)"
			} else if strings.HasPrefix(e.source, filepath.Join(os.Getenv("PWD"), "bin")) {
				hint = " (make images builds it)"
			}
			return fmt.Errorf("image %s needs %s%s", img.name, e.source, hint)
		}
	}
	return nil
}
