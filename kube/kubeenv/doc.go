// Package kubeenv reads what a controller needs to run from its
// humus.Host: the kube.Connection to its API server, from a kubeconfig or
// from the pod it runs in, and the kube.Settings every controller has.
//
// kube itself reads no environment variable and no file, and defines no
// variable name: a Connection and Settings are plain values the App fills
// in its Init. kubeenv is how most Apps fill them, as kubectl and
// client-go's in-cluster config would, but through the Host:
//
//	func Init(ctx context.Context, s *humus.Setup) ([]humus.Service, error) {
//		conn, connErr := kubeenv.Connection(ctx, s.Host)
//		settings, setErr := config.Struct(func(r *config.Resolver) kube.Settings {
//			return kubeenv.Settings(r, s.Host, "memcached-controller")
//		}).Read(ctx)
//		if err := errors.Join(connErr, setErr); err != nil {
//			return nil, err
//		}
//		client, err := kube.NewClient(s, conn)
//		...
//	}
//
// What it reads:
//
//   - [Connection]: the kubeconfig KUBECONFIG names, when it is set, as
//     [Kubeconfig] reads it; otherwise the pod's, as [InCluster] reads it.
//   - [Kubeconfig]: a kubeconfig's context, or several kubeconfigs merged
//     as kubectl merges them, and the CA, client certificate, key and
//     token files it names.
//   - [InCluster]: KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT and
//     the service account's ca.crt and token in
//     /var/run/secrets/kubernetes.io/serviceaccount/.
//   - [Settings]: POD_NAMESPACE, POD_NAME, WORKERS, SHARDS, the retries'
//     RETRY_BASE_DELAY and RETRY_MAX_DELAY, RECONCILE_TIMEOUT,
//     LOW_PRIORITY_MAX_WAIT and the Lease's LEASE_DURATION, RENEW_DEADLINE
//     and RETRY_PERIOD, in a config.Struct, each checked with kube's own
//     Check function; config.Checked reads an App's own settings the same
//     way.
//
// The log records' verbosity is not a kube.Setting but the Telemetry's:
// telemetry.Build (in the core module) reads LOG_VERBOSITY, a V level as
// Kubernetes' -v flag takes it, named as these are, beside OpenTelemetry's
// OTEL_* variables.
//
// What it guarantees:
//
//   - Everything is read through the Host: the environment through
//     LookupEnv, files through FS, and relative paths against Dir (see
//     humus.Host.HostPath). Nothing reads the process's environment or
//     disk, and nothing runs a program, so a test sets it all on
//     humustest.NewHost.
//   - Every problem is reported at once, in one error: each missing or
//     invalid variable named, and each kubeconfig problem named by its
//     file, its context and its field.
//   - A kubeconfig is taken as kubectl takes it, or refused: what kubeenv
//     can't follow faithfully (exec plugins, auth providers,
//     insecure-skip-tls-verify, proxy-url, basic auth, impersonation) is
//     an error naming it and saying what to do instead, never ignored.
//   - A token in a file (the pod's, a kubeconfig's tokenFile) is read again
//     on each call of Connection.Token, which the kube Client makes at
//     most once a minute, so a token the kubelet rotates, or that is
//     rewritten in its file, is picked up without a restart.
//   - No token, key or password is ever in an error.
//   - Each problem is a line of the error of its own, beginning
//     "kubeenv: ", in the errors of Connection, Kubeconfig and InCluster
//     and of the Token they fill. Settings records its problems in the
//     App's config.Resolver instead, as config's, each naming its
//     variable.
//
// A kubeconfig is decoded with client-go's clientcmd/api/latest, as
// clientcmd.Load decodes one; kubeenv doesn't import clientcmd, whose
// loaders read the process's environment and disk, and whose package
// variables read $HOME as it is initialised.
//
// # Running locally with the controller's own rights
//
// A controller run on a workstation with an admin's kubeconfig can do
// anything, so a rule missing from its RBAC shows only once it is deployed.
// To run it with the rights its RBAC gives its ServiceAccount instead,
// give it a kubeconfig with a token of that ServiceAccount (kubectl create
// token) and the cluster's CA in a file beside it. In a folder of its own,
// outside the repository, as the kubeconfig holds a token, and with the
// admin's kubeconfig current:
//
//	SA=memcached-controller NS=memcached-system
//	DIR=$PWD
//	kubectl config view --raw --minify --flatten -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > ca.crt
//	kubectl config set-cluster sa --kubeconfig=sa.kubeconfig --certificate-authority=ca.crt \
//		--server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
//	kubectl config set-credentials "$SA" --kubeconfig=sa.kubeconfig --token="$(kubectl create token "$SA" -n "$NS")"
//	kubectl config set-context sa --kubeconfig=sa.kubeconfig --cluster=sa --user="$SA"
//	kubectl config use-context sa --kubeconfig=sa.kubeconfig
//
// --flatten embeds the admin's CA when its kubeconfig names it by a file,
// as minikube's does, so ca.crt gets it either way. Then, in the same
// shell, from the controller's module, run the controller with KUBECONFIG
// set to that kubeconfig's full path, with POD_NAMESPACE and POD_NAME as
// its Deployment sets them:
//
//	KUBECONFIG=$DIR/sa.kubeconfig POD_NAMESPACE=$NS POD_NAME=$(uname -n) go run ./cmd/controller
//
// A request its RBAC doesn't allow is refused with a 403 naming
// system:serviceaccount:NS:SA, as it would be in the cluster. The token
// expires, in an hour unless kubectl create token is given a longer
// --duration: run set-credentials again for a new one. The controller
// takes part in its Lease in NS like any replica: while one deployed in
// the cluster holds it, the local one only waits, so scale the Deployment
// to 0 first.
package kubeenv
