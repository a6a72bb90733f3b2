// Command removeversion removes the oldest API version of a kind (see
// internal/gen/addversion), after reading the CRD's status.storedVersions from the cluster
// of the kubeconfig: a version objects may still be stored in is not removed. make
// remove-version runs it from the repository root:
//
//	go run ./hack/removeversion -kind WebApp -version v1alpha1 -kubeconfig ~/.kube/config
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"transwarp.io/tos/warpdrive-operator/internal/gen/addversion"
)

func main() {
	o := addversion.RemoveOptions{Root: "."}
	flag.StringVar(&o.Root, "root", o.Root, "the repository root")
	flag.StringVar(&o.Kind, "kind", "", "the kind, as watches.yaml names it, such as WebApp")
	flag.StringVar(&o.Version, "version", "", "the version to remove, the kind's oldest")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the kubeconfig of the cluster whose CRD's status.storedVersions to read")
	flag.Parse()
	if o.Kind == "" || o.Version == "" {
		fmt.Fprintln(os.Stderr, "usage: make remove-version KIND=<Kind> VERSION=<version> [KUBECONFIG=<kubeconfig>]")
		os.Exit(2)
	}
	if err := run(o, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "remove-version:", err)
		os.Exit(1)
	}
}

func run(o addversion.RemoveOptions, kubeconfig string) error {
	name, err := addversion.CRDName(o.Root, o.Kind)
	if err != nil {
		return err
	}
	stored, err := storedVersions(kubeconfig, name)
	if err != nil {
		return err
	}
	o.StoredVersions = stored
	written, err := addversion.Remove(o)
	if err != nil {
		return err
	}
	fmt.Printf("Removed version %s of %s (the cluster's CRD stores %v). Files written:\n", o.Version, o.Kind, stored)
	for _, f := range written {
		fmt.Printf("  %s\n", f)
	}
	return nil
}

// storedVersions reads the status.storedVersions of the CRD name. A cluster without the CRD
// stores no object of it: nothing to refuse for.
func storedVersions(kubeconfig, name string) ([]string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", kubeconfig, err)
	}
	client, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Printf("The cluster of %s has no CRD %s.\n", cfg.Host, name)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	return crd.Status.StoredVersions, nil
}
