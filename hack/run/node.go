package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/localnode"
	"github.com/trustplane/trustplane/internal/version"
)

// sandboxImage is the pause image `make images` builds, named as the chart tags images.
var sandboxImage = version.Image("pause")

// wantNode says whether make run runs a real node for sample-node, printing in one line
// why not when it cannot: its control plane must be the local one, and the machine must
// be Linux with root, containerd and the CNI plugins, kubelet and the images built.
// It returns the machine reserved for the node, or nil.
func wantNode(opts options, local bool) *localnode.Reservation {
	if !opts.node || !local {
		return nil
	}
	if err := localnode.Preflight(opts.nodeBinDir, opts.imagesDir); err != nil {
		fmt.Printf("no real node (%v): sample-node is a stand-in, its pods stay Pending\n", err)
		return nil
	}
	// The bridge carries the node's address, which the API server binds.
	r, err := localnode.Reserve(func(format string, args ...any) { fmt.Printf("node: "+format+"\n", args...) })
	if err != nil {
		fmt.Printf("no real node (%v): sample-node is a stand-in, its pods stay Pending\n", err)
		return nil
	}
	return r
}

// startNode starts containerd, kubelet and kube-proxy as sample-node.
func startNode(ctx context.Context, r *localnode.Reservation, t *target, dir string, opts options) (*localnode.Node, error) {
	start := time.Now()
	kubelet, proxy, scheduler, err := t.local.NodeKubeconfigs(localcp.SampleNodeName)
	if err != nil {
		return nil, fmt.Errorf("node credentials: %w", err)
	}
	ca, err := localcp.KubeletClientCA(dir)
	if err != nil {
		return nil, err
	}
	node, err := localnode.Start(ctx, r, localnode.Config{
		Dir: filepath.Join(dir, "node"), Name: localcp.SampleNodeName,
		NodeBinDir: opts.nodeBinDir, ImagesDir: opts.imagesDir, SandboxImage: sandboxImage,
		KubeletKubeconfig: kubelet, ProxyKubeconfig: proxy, SchedulerKubeconfig: scheduler, KubeletClientCA: ca,
		Log: func(format string, args ...any) { fmt.Printf("node: "+format+"\n", args...) },
	})
	if err != nil {
		return nil, fmt.Errorf("starting node %s: %w", localcp.SampleNodeName, err)
	}
	fmt.Printf("node %s is up (containerd, kubelet, kube-proxy, kube-scheduler) after %s; pods get addresses in %s\n",
		localcp.SampleNodeName, time.Since(start).Round(100*time.Millisecond), localnode.PodSubnet)
	return node, nil
}
