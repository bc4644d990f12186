// Package deploytest checks what each example ships in its deploy/
// folder: that every document of every YAML file in it decodes strictly,
// that the Deployment fits the rest (its namespace, its ServiceAccount,
// the settings the App reads, probes, resources and a restricted security
// context), and, in TestClusterDeploy, that the API server accepts all of
// it with server-side apply and strict field validation.
//
// It is a test package of its own so that neither example's app package
// depends on it.
package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// A Doc is one document of a YAML file in a deploy/ folder.
type Doc struct {
	File  string // the file's path, relative to the deploy/ folder
	Index int    // the document's index in the file, from 0
	JSON  []byte // the document, as JSON
	Obj   *unstructured.Unstructured
}

// String names the document, such as "rbac.yaml#2 ClusterRoleBinding
// memcached-controller".
func (d Doc) String() string {
	return fmt.Sprintf("%s#%d %s %s", d.File, d.Index, d.Obj.GetKind(), d.Obj.GetName())
}

// Read returns every document of every .yaml or .yml file under dir, in
// the order they are applied in: Namespaces first, then
// CustomResourceDefinitions, then the rest, each group in the order of
// the files' paths and of the documents in them. A document with nothing
// but comments is skipped; one without apiVersion, kind or a name is an
// error.
func Read(dir string) ([]Doc, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no YAML file in %s", dir)
	}
	slices.Sort(files)

	var docs []Doc
	var errs []error
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 0; ; i++ {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s#%d: %w", rel, i, err))
				break
			}
			if empty(raw) {
				continue
			}
			js, err := yaml.YAMLToJSONStrict(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s#%d: %w", rel, i, err))
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				errs = append(errs, fmt.Errorf("%s#%d: %w", rel, i, err))
				continue
			}
			if obj.GetName() == "" {
				errs = append(errs, fmt.Errorf("%s#%d: %s has no name", rel, i, obj.GetKind()))
				continue
			}
			docs = append(docs, Doc{File: filepath.ToSlash(rel), Index: i, JSON: js, Obj: obj})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortStableFunc(docs, func(a, b Doc) int { return rank(a) - rank(b) })
	return docs, nil
}

// rank orders the documents: Namespaces, then CRDs, then the rest.
func rank(d Doc) int {
	switch d.Obj.GroupVersionKind().GroupKind().String() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition.apiextensions.k8s.io":
		return 1
	default:
		return 2
	}
}

// empty reports whether a YAML document holds nothing but comments and
// blank lines.
func empty(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}
