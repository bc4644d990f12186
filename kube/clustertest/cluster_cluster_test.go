package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/z5labs/humus/kube/internal/procutil"
)

// TestMain builds the control plane: this repository's tests run where no
// download location is reachable, and fetch nothing (HUMUS_CONTROLPLANE_FETCH
// overrides it).
func TestMain(m *testing.M) { os.Exit(Run(m, Fetch(BuildOnly))) }

func TestClusterVersion(t *testing.T) {
	c := Get(t)
	v, err := adminClient(t, c).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" || v.Major != "1" || v.Minor != "37" {
		t.Errorf("/version = %s (major %q, minor %q), want v1.37.2 (1, 37)", v.GitVersion, v.Major, v.Minor)
	}
}

func TestClusterKubeconfig(t *testing.T) {
	c := Get(t)
	if host, _, err := net.SplitHostPort(c.Server()); err != nil || host != "127.0.0.1" {
		t.Errorf("Server() = %q, want 127.0.0.1:PORT", c.Server())
	}
	onDisk, err := os.ReadFile(c.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, c.Kubeconfig()) {
		t.Errorf("the file at KubeconfigPath differs from Kubeconfig()")
	}
	kc, err := clientcmd.Load(c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://"+c.Server() || cfg.BearerToken != c.AdminToken() || !bytes.Equal(cfg.CAData, c.CAPEM()) {
		t.Errorf("kubeconfig gives host %q, token %q, CA %q; want %q, the admin token, the CA", cfg.Host, cfg.BearerToken, cfg.CAData, "https://"+c.Server())
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := client.CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("kube-system is %q, want Active", ns.Status.Phase)
	}
}

func TestClusterAPIServerRestart(t *testing.T) {
	c := Get(t)
	testRestart(t, c, c.StopAPIServer, c.StartAPIServer)
}

func TestClusterEtcdRestart(t *testing.T) {
	c := Get(t)
	testRestart(t, c, c.StopEtcd, c.StartEtcd)
}

// testRestart checks that data written before stop and start is kept, and
// that a client and an informer made before reach the server after.
func testRestart(t *testing.T, c *Cluster, stop, start func(testing.TB)) {
	ns := c.Namespace(t)
	client := adminClient(t, c)
	before := createConfigMap(t, client, ns, "before", nil)

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}

	begin := time.Now()
	stop(t)
	stopped := time.Since(begin)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "during"}}, metav1.CreateOptions{})
	cancel()
	if err == nil {
		t.Errorf("creating a ConfigMap while stopped succeeded, want an error")
	}
	begin = time.Now()
	start(t)
	t.Logf("stopped in %s, started again in %s", stopped.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	got, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), "before", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the client made before the restart: %v", err)
	}
	if got.UID != before.UID || got.Data["k"] != "before" {
		t.Errorf("after the restart the ConfigMap is uid %s, data %v; want uid %s, data k=before", got.UID, got.Data, before.UID)
	}
	after := createConfigMap(t, client, ns, "after", nil)
	Eventually(t, time.Minute, func(context.Context) error {
		obj, ok, err := informer.GetStore().GetByKey(ns + "/after")
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("the informer's store lacks %s/after", ns)
		}
		if uid := obj.(*corev1.ConfigMap).UID; uid != after.UID {
			return fmt.Errorf("the informer holds uid %s, want %s", uid, after.UID)
		}
		return nil
	})
}

// childEnv, set, makes TestClusterNoProcessSurvives the child it runs.
const childEnv = "HUMUS_CLUSTER_TEST_CHILD"

// TestClusterNoProcessSurvives runs this test binary again as a child that
// starts a control plane, kills the child with SIGKILL, and checks that
// every process of its control plane is gone and its ports are closed.
func TestClusterNoProcessSurvives(t *testing.T) {
	SkipShort(t)
	if os.Getenv(childEnv) != "" {
		c := Get(t)
		fmt.Printf("control plane %s %s %d %d %d\n", c.dir, c.server, c.etcd.pid(), c.apiserver.pid(), c.controllerManager.pid())
		time.Sleep(time.Hour) // until the parent kills this process
		return
	}
	if _, err := build(t.Context(), options{progress: io.Discard, fetch: BuildOnly}); err != nil { // so the child doesn't build; these machines fetch nothing
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestClusterNoProcessSurvives$", "-test.timeout=10m")
	child.Env = append(os.Environ(), childEnv+"=1")
	var stderr procutil.SyncBuffer // written by exec's goroutine as the child runs
	child.Stderr = &stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill() }()

	line := childReport(t, stdout, &stderr)
	fields := strings.Fields(line)
	dir, server := fields[0], fields[1]
	var pids []int
	for _, f := range fields[2:] {
		pid, err := strconv.Atoi(f)
		if err != nil || !procutil.Alive(pid) {
			t.Fatalf("the child reported %q: pid %s isn't a live process", line, f)
		}
		pids = append(pids, pid)
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // it says the child was killed

	// A killed process's threads may still be exiting, holding its
	// sockets, when its leader already shows as a zombie: wait for both.
	Eventually(t, 10*time.Second, func(context.Context) error {
		for _, pid := range pids {
			if procutil.Alive(pid) {
				return fmt.Errorf("pid %d outlived the test binary that started it", pid)
			}
		}
		if conn, err := net.DialTimeout("tcp", server, time.Second); err == nil {
			_ = conn.Close()
			return fmt.Errorf("%s still accepts connections after the test binary died", server)
		}
		return nil
	})
	var said bytes.Buffer
	removeOrphans(&said)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dead test binary's folder %s is still there after removeOrphans (%v); it said %q", dir, err, said.String())
	}
}

// childReport is what the child of TestClusterNoProcessSurvives reports
// of its control plane: its folder, server and processes' ids.
func childReport(t *testing.T, stdout io.Reader, stderr *procutil.SyncBuffer) string {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if line, ok := strings.CutPrefix(scanner.Text(), "control plane "); ok {
				lines <- line
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		return line
	case <-time.After(readyTimeout * 3):
		t.Fatalf("the child never reported its control plane; its stderr:\n%s", stderr.String())
		return ""
	}
}

// adminClient is a clientset for the admin.
func adminClient(t testing.TB, c *Cluster) *kubernetes.Clientset {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// createConfigMap creates ConfigMap name in ns with data k=name, owned by
// owners.
func createConfigMap(t testing.TB, client kubernetes.Interface, ns, name string, owners []metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
		Data:       map[string]string{"k": name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ConfigMap %s/%s: %v", ns, name, err)
	}
	return cm
}

func TestClusterCPUCountsEachComponentsWork(t *testing.T) {
	c := Get(t)
	before := c.CPU(t)
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, ok := before[name]; !ok {
			t.Errorf("CPU has no %s: %v", name, before)
		}
	}
	kc := adminClient(t, c)
	for range 200 {
		if _, err := kc.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	after := c.CPU(t)
	if after["kube-apiserver"] <= before["kube-apiserver"] {
		t.Errorf("200 lists cost kube-apiserver no CPU: %s, then %s", before["kube-apiserver"], after["kube-apiserver"])
	}
}

// failingChildEnv, set, makes TestClusterAFailuresOwnLineComesLast the
// failing test it runs.
const failingChildEnv = "HUMUS_CLUSTER_TEST_FAILING_CHILD"

// TestClusterAFailuresOwnLineComesLast runs this test binary again as a
// child whose test fails after a write its RBAC refuses, as go test runs
// a test binary (stdout and stderr in one stream, without -v), and checks
// that the child's output names the folder the logs are kept in, shows
// the refused write, and ends with the test's own failure, the go test
// FAIL lines after it and nothing else.
func TestClusterAFailuresOwnLineComesLast(t *testing.T) {
	const failure = "the test's own failure, which must come last"
	if os.Getenv(failingChildEnv) != "" {
		c := Get(t)
		ns := c.Namespace(t)
		cfg := c.AdminConfig()
		cfg.BearerToken = c.ServiceAccount(t, ns, "nobody")
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused"}}, metav1.CreateOptions{})
		t.Errorf("%s (the create: %v)", failure, err)
		return
	}
	SkipShort(t)
	if _, err := build(t.Context(), options{progress: io.Discard, fetch: BuildOnly}); err != nil { // so the child doesn't build; these machines fetch nothing
		t.Fatal(err)
	}
	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestClusterAFailuresOwnLineComesLast$", "-test.timeout=10m")
	child.Env = append(os.Environ(), failingChildEnv+"=1")
	out, err := child.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed:\n%s", out)
	}
	text := string(out)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var last []string // from the test's failure on
	for i, line := range lines {
		if strings.Contains(line, failure) {
			last = lines[i:]
		}
	}
	if len(last) != 2 || last[1] != "FAIL" {
		t.Errorf("the child's output doesn't end with its failure, then FAIL:\n%s", text)
	}
	m := regexp.MustCompile(`clustertest: TestClusterAFailuresOwnLineComesLast failed\. The control plane's logs are in (\S+) \(etcd\.log, kube-apiserver\.log, kube-controller-manager\.log, audit\.log\)\.`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the child's output doesn't name the kept logs:\n%s", text)
	}
	t.Cleanup(func() { _ = os.RemoveAll(m[1]) })
	if !strings.Contains(text, "    audit.log: 403 create /api/v1/namespaces/") || !strings.Contains(text, "by system:serviceaccount:") {
		t.Errorf("the child's output doesn't show the refused create:\n%s", text)
	}
	if strings.Contains(text, "=== cluster: the last") {
		t.Errorf("the child's output has the components' last lines:\n%s", text)
	}
	for _, name := range []string{"etcd.log", "kube-apiserver.log", "kube-controller-manager.log", "audit.log"} {
		if info, err := os.Stat(filepath.Join(m[1], name)); err != nil || info.Size() == 0 {
			t.Errorf("the kept %s: %v, want the whole log", name, err)
		}
	}
}
