package main

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// templateFS holds the files the commands write, as text/template
// templates of a data.
//
//go:embed templates/*.tmpl
var templateFS embed.FS

// data is what a template is executed with: the resource, and the names
// of the module it is in.
type data struct {
	resource
	AppName      string // the controller's name, website-controller
	Namespace    string // the controller's namespace in deploy/, website-system
	HumusVersion string // the versions go.mod requires of humus's modules
	KubeVersion  string
}

func newData(r resource, module string) data {
	name := AppName(module)
	r.Module = module
	return data{
		resource:  r,
		AppName:   name,
		Namespace: strings.TrimSuffix(name, "-controller") + "-system",
	}
}

// render executes the template named name with d.
func render(name string, d any) ([]byte, error) {
	t, err := template.ParseFS(templateFS, "templates/"+name+".tmpl")
	if err != nil {
		return nil, fmt.Errorf("scaffold: the template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("scaffold: the template %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// renderAll renders each template into files at its path.
func renderAll(out files, d any, paths map[string]string) error {
	for path, name := range paths {
		b, err := render(name, d)
		if err != nil {
			return err
		}
		out[path] = b
	}
	return nil
}
