// Command images is `make images`: it builds trustplane's container images — trustplane
// (the one static binary), jwks-nginx (Debian's nginx, unprivileged) and pause (the
// sandbox of make run's node) — as OCI image archives under -out, each with a CycloneDX
// SBOM beside it, with no Docker engine and no registry. Every time stamp is -created and
// every file's order and owner fixed, so the same inputs give the same digests. It prints
// each image's reference and digest.
//
// An archive is an OCI image layout (index.json naming the image for containerd) plus a
// Docker manifest.json, as `docker save` writes since Docker 25: `ctr images import`,
// `kind load image-archive`, `docker load`, `podman load` and `skopeo copy
// oci-archive:` take it.
package main

import (
	"archive/tar"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type options struct {
	out, repository, tag string
	trustplane, pause    string
	version, revision    string
	created              time.Time
}

func main() {
	var opts options
	var created string
	flag.StringVar(&opts.out, "out", "bin/images", "Directory for the archives (<name>.tar) and SBOMs (<name>.cdx.json).")
	flag.StringVar(&opts.repository, "repository", "ghcr.io/trustplane", "Repository prefix of the image names.")
	flag.StringVar(&opts.tag, "tag", "", "Tag of every image (the chart's appVersion).")
	flag.StringVar(&opts.trustplane, "trustplane", "bin/trustplane", "The static trustplane binary (make build).")
	flag.StringVar(&opts.pause, "pause", "", "The static pause binary (hack/images/pause).")
	flag.StringVar(&opts.version, "version", "", "Version stamped into the binary, recorded as the image's version label.")
	flag.StringVar(&opts.revision, "revision", "", "Commit the images are built from (a label).")
	flag.StringVar(&created, "created", "0", "Creation time of every image and file, in seconds since 1970 (the commit's time).")
	flag.Parse()
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil || opts.tag == "" || opts.pause == "" {
		fmt.Fprintln(os.Stderr, "images: -tag, -pause and a numeric -created are required")
		os.Exit(2)
	}
	opts.created = time.Unix(secs, 0).UTC()
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(opts options) error {
	nginx, err := nginxImage()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(opts.out, 0o750); err != nil {
		return err
	}
	for _, img := range []image{trustplaneImage(opts.trustplane), nginx, pauseImage(opts.pause)} {
		if err := requireFiles(img); err != nil {
			return err
		}
		ref := fmt.Sprintf("%s/%s:%s", opts.repository, img.name, opts.tag)
		digest, size, err := build(img, ref, opts)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		fmt.Printf("%-40s %s  %s (%.1f MB)\n", ref, digest, filepath.Join(opts.out, img.name+".tar"), float64(size)/1e6)
	}
	return nil
}

// build writes img's archive and SBOM; it returns the manifest digest and archive size.
func build(img image, ref string, opts options) (string, int64, error) {
	oci, err := assemble(img, opts)
	if err != nil {
		return "", 0, err
	}
	digest, err := oci.Digest()
	if err != nil {
		return "", 0, err
	}
	archive := filepath.Join(opts.out, img.name+".tar")
	if err := writeArchive(archive, oci, ref, opts.created); err != nil {
		return "", 0, err
	}
	sbom, err := os.Create(filepath.Join(opts.out, img.name+".cdx.json"))
	if err != nil {
		return "", 0, err
	}
	defer sbom.Close()
	if err := writeSBOM(sbom, img, ref, digest.String(), opts.created); err != nil {
		return "", 0, fmt.Errorf("SBOM: %w", err)
	}
	st, err := os.Stat(archive)
	if err != nil {
		return "", 0, err
	}
	return digest.String(), st.Size(), sbom.Close()
}

func assemble(img image, opts options) (v1.Image, error) {
	l, err := layer(img.entries, opts.created)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	withLayer, err := mutate.Append(base, mutate.Addendum{Layer: l, History: v1.History{
		Created: v1.Time{Time: opts.created}, CreatedBy: "make images", Comment: img.description,
	}})
	if err != nil {
		return nil, err
	}
	ports := map[string]struct{}{}
	for _, p := range img.ports {
		ports[p] = struct{}{}
	}
	cfg := &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: opts.created},
		Config: v1.Config{
			User: img.user, Entrypoint: img.entrypoint, Env: img.env, WorkingDir: "/",
			ExposedPorts: ports, StopSignal: img.stopSignal,
			Labels: map[string]string{
				"org.opencontainers.image.title":       img.name,
				"org.opencontainers.image.description": img.description,
				"org.opencontainers.image.version":     opts.version,
				"org.opencontainers.image.revision":    opts.revision,
				"org.opencontainers.image.source":      "https://github.com/trustplane/trustplane",
				"org.opencontainers.image.licenses":    "Apache-2.0",
			},
		},
	}
	if len(ports) == 0 {
		cfg.Config.ExposedPorts = nil
	}
	// Keep the layer and history; set the rest.
	current, err := withLayer.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg.RootFS, cfg.History = current.RootFS, current.History
	return mutate.ConfigFile(withLayer, cfg)
}

// writeArchive writes img as an OCI layout naming it ref, plus Docker's manifest.json,
// into one tar file with fixed time stamps and order.
func writeArchive(archive string, img v1.Image, ref string, created time.Time) error {
	tmp, err := os.MkdirTemp(filepath.Dir(archive), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref, // skopeo, podman
		"io.containerd.image.name":          ref, // ctr images import, kind
	})); err != nil {
		return err
	}
	manifest, err := dockerManifest(img, ref)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), manifest, 0o644); err != nil {
		return err
	}
	return tarDirectory(tmp, archive, created)
}

// dockerManifest is the manifest.json of `docker save`, pointing into the OCI blobs.
func dockerManifest(img v1.Image, ref string) ([]byte, error) {
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	entry := struct {
		Config   string   `json:"Config"`
		RepoTags []string `json:"RepoTags"`
		Layers   []string `json:"Layers"`
	}{Config: blob(cfg), RepoTags: []string{ref}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		entry.Layers = append(entry.Layers, blob(d))
	}
	return json.Marshal([]any{entry})
}

func tarDirectory(root, archive string, modTime time.Time) error {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	tmp := archive + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(out)
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: modTime, Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size(), Format: tar.FormatPAX}
		if st.IsDir() {
			hdr.Name, hdr.Mode, hdr.Typeflag, hdr.Size = hdr.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !st.IsDir() {
			if err := copyFile(tw, p); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, archive)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
