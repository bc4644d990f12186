package kubeenv_test

import (
	"context"
	"fmt"
	"testing/fstest"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/config"
	"github.com/z5labs/humus/humustest"
	"github.com/z5labs/humus/kube"
	"github.com/z5labs/humus/kube/clustertest"
	"github.com/z5labs/humus/kube/kubeenv"
)

// clusterCA stands for a cluster's CA certificate, as its ca.crt holds
// one: a fresh one, made as a test makes one.
func clusterCA() []byte {
	ca, err := clustertest.NewCA("example CA")
	if err != nil {
		panic(err)
	}
	return ca.PEM()
}

// In Init, Connection reads the kubeconfig KUBECONFIG names, or, in a pod,
// the pod's service account, and kube.NewClient reaches the API server
// with it. Here, on humustest's Host, the process runs in a pod.
func ExampleConnection() {
	h := humustest.NewHost() // humus.Main hands Init the real Host
	h.Env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Files[clustertest.CAFile] = &fstest.MapFile{Data: clusterCA()}
	h.Files[clustertest.TokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi...\n")}
	s := &humus.Setup{Host: h.Host()}
	ctx := context.Background()

	// In Init:
	conn, err := kubeenv.Connection(ctx, s.Host)
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := kube.NewClient(s, conn)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(client.Config().Host)
	// Output: https://10.96.0.1:443
}

// A kubeconfig that names the cluster's CA and the token by files beside
// it, as `kubectl config set-cluster --certificate-authority=ca.crt`
// writes one, read by a path relative to the working directory. The token
// file is read again on each call of Token.
func ExampleKubeconfig() {
	h := humustest.NewHost() // humus.OSHost() in a real program
	h.Dir = "/home/me/project"
	h.Files["home/me/.kube/sa/config"] = &fstest.MapFile{Data: []byte(`apiVersion: v1
kind: Config
current-context: sa
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
contexts:
- name: sa
  context:
    cluster: dev
    user: memcached-controller
users:
- name: memcached-controller
  user:
    tokenFile: token
`)}
	h.Files["home/me/.kube/sa/ca.crt"] = &fstest.MapFile{Data: clusterCA()}
	h.Files["home/me/.kube/sa/token"] = &fstest.MapFile{Data: []byte("eyJhbGciOi...\n")}

	conn, err := kubeenv.Kubeconfig(context.Background(), h.Host(), "../.kube/sa/config", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	token, err := conn.Token(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(conn.Server, token)
	// Output: 127.0.0.1:6443 eyJhbGciOi...
}

// A kubeconfig whose user runs an exec plugin, as a cloud's kubeconfig
// does, is refused: kubeenv runs no program. The cloud's own SDK fills
// kube.Connection.Token instead.
func ExampleKubeconfig_execPlugin() {
	h := humustest.NewHost()
	h.Files["home/me/.kube/config"] = &fstest.MapFile{Data: []byte(`apiVersion: v1
kind: Config
current-context: eks
clusters:
- name: eks
  cluster:
    server: https://ABCD.gr7.eu-west-1.eks.amazonaws.com
contexts:
- name: eks
  context:
    cluster: eks
    user: eks
users:
- name: eks
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args: [eks, get-token, --cluster-name, prod]
`)}

	_, err := kubeenv.Kubeconfig(context.Background(), h.Host(), "/home/me/.kube/config", "")
	fmt.Println(err)
	// Output: kubeenv: kubeconfig /home/me/.kube/config: context "eks": user "eks": exec: not supported: kubeenv runs no credential plugin (here "aws"); fill kube.Connection.Token with the cloud's own SDK in your code instead, or use a token (kubectl create token)
}

// In a pod, the Connection is what the kubelet provides: the Service's
// address in the environment, and the service account's CA and token,
// which the kubelet rotates, so Token reads it again on each call.
func ExampleInCluster() {
	h := humustest.NewHost()
	h.Env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
	h.Env["KUBERNETES_SERVICE_PORT"] = "443"
	h.Files[clustertest.CAFile] = &fstest.MapFile{Data: clusterCA()}
	h.Files[clustertest.TokenFile] = &fstest.MapFile{Data: []byte("eyJhbGciOi...\n")}
	ctx := context.Background()

	conn, err := kubeenv.InCluster(ctx, h.Host())
	if err != nil {
		fmt.Println(err)
		return
	}
	token, err := conn.Token(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(conn.Server, token)
	// Output: [fd00::1]:443 eyJhbGciOi...
}

// The settings every controller reads, and one of the App's own,
// WATCH_NAMESPACE, checked by kube's own Check function, in one
// config.Struct, which names every missing or invalid variable in one
// error.
func ExampleSettings() {
	h := humustest.NewHost()
	h.Env["POD_NAMESPACE"] = "memcached-system" // from the downward API
	h.Env["POD_NAME"] = "memcached-controller-7d9f-x2k4q"
	h.Env["WORKERS"] = "4"
	h.Env["WATCH_NAMESPACE"] = "shop"
	s := &humus.Setup{Host: h.Host()}

	// In Init:
	ks, err := config.Struct(func(r *config.Resolver) kube.Settings {
		ks := kubeenv.Settings(r, s.Host, "memcached-controller")
		ks.Namespace = config.Parse(r, config.Env(s.Host, "WATCH_NAMESPACE"), config.Checked(config.AsIs, kube.CheckWatchNamespace))
		return ks
	}).Read(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ks.Name, ks.LeaderElection.Namespace, ks.LeaderElection.Identity)
	fmt.Println(ks.Workers, ks.Shards, ks.Namespace)
	// Output:
	// memcached-controller memcached-system memcached-controller-7d9f-x2k4q
	// 4 1 shop
}
