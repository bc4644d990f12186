package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A changelog is what apicheck reads from CHANGELOG.md: the releases, newest
// first, each with its tags and the commit it was cut from, and the
// Unreleased section.
type changelog struct {
	unreleased section
	releases   []release
}

// A section is one of the changelog's level-2 sections: the names its
// Changed and Removed subsections give in code spans.
type section struct {
	// names holds each code span of the Changed and Removed subsections,
	// cut at its first character that can't be in a qualified Go name, so
	// `kube.NewController(s, ...)` names kube.NewController.
	names map[string]bool
}

// A release is a level-2 section that names tags and a commit.
type release struct {
	heading string
	line    int
	tags    []string
	commit  string
	section
}

var (
	// tagRE matches a module's release tag: vX.Y.Z for the module at the
	// repository's root, dir/vX.Y.Z for the module in dir.
	tagRE    = regexp.MustCompile(`^(?:[A-Za-z0-9_.-]+/)*v[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?$`)
	commitRE = regexp.MustCompile(`\b[0-9a-f]{40}\b`)
	spanRE   = regexp.MustCompile("`+([^`]+)`+")
)

// parseChangelog reads a changelog: level-2 headings (## ) start sections,
// "## Unreleased" the changes not yet released, any other one a release,
// whose heading names its tags (v0.1.0, kube/v0.1.0) and whose text holds
// the full hash of the commit it was cut from. Level-3 headings inside a
// section (### Changed, ### Removed, ...) start its subsections. Every
// malformed release is reported in one error.
func parseChangelog(name string, r io.Reader) (changelog, error) {
	var (
		cl      = changelog{unreleased: section{names: map[string]bool{}}}
		errs    []string
		cur     *section // the level-2 section being read, nil before the first
		rel     *release // cur's release, nil for Unreleased
		named   bool     // whether the level-3 subsection being read is Changed or Removed
		text    strings.Builder
		lineNum int
	)
	flush := func() {
		if cur != nil && named {
			for _, m := range spanRE.FindAllStringSubmatch(text.String(), -1) {
				if n := qualifiedName(m[1]); n != "" {
					cur.names[n] = true
				}
			}
		}
		text.Reset()
	}
	finishRelease := func() {
		if rel != nil {
			errs = append(errs, rel.problems(name)...)
			cl.releases = append(cl.releases, *rel)
		}
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lineNum++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			flush()
			finishRelease()
			heading := strings.TrimSpace(strings.TrimPrefix(line, "## "))
			named = false
			if strings.EqualFold(heading, "Unreleased") {
				rel, cur = nil, &cl.unreleased
				continue
			}
			rel = newRelease(heading, lineNum)
			cur = &rel.section
		case strings.HasPrefix(line, "### "):
			flush()
			sub := strings.TrimSpace(strings.TrimPrefix(line, "### "))
			named = strings.EqualFold(sub, "Changed") || strings.EqualFold(sub, "Removed")
		case strings.HasPrefix(line, "# "):
			flush()
			finishRelease()
			cur, rel, named = nil, nil, false
		default:
			if rel != nil && rel.commit == "" {
				rel.commit = commitRE.FindString(line)
			}
			text.WriteString(line)
			text.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return changelog{}, fmt.Errorf("reading %s: %w", name, err)
	}
	flush()
	finishRelease()
	if len(errs) > 0 {
		return changelog{}, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return cl, nil
}

// newRelease returns the release of a heading, with the tags it names.
func newRelease(heading string, line int) *release {
	rel := &release{heading: heading, line: line, section: section{names: map[string]bool{}}}
	for _, f := range strings.FieldsFunc(heading, func(r rune) bool {
		return strings.ContainsRune(" ,`()[]", r)
	}) {
		if tagRE.MatchString(f) {
			rel.tags = append(rel.tags, f)
		}
	}
	return rel
}

// problems says what is wrong with the release read from the changelog
// name, one line a problem.
func (rel *release) problems(name string) []string {
	var p []string
	if len(rel.tags) == 0 {
		p = append(p, fmt.Sprintf("%s:%d: release %q names no tag (v1.2.3 for the root module, dir/v1.2.3 for the module in dir)", name, rel.line, rel.heading))
	}
	if rel.commit == "" {
		p = append(p, fmt.Sprintf("%s:%d: release %q records no commit: its section names the full 40-character hash of the commit it was cut from "+
			"(the release commit itself can't: the commit after it records it)", name, rel.line, rel.heading))
	}
	return p
}

// readChangelog reads the changelog at path.
func readChangelog(path string) (changelog, error) {
	f, err := os.Open(path)
	if err != nil {
		return changelog{}, err
	}
	defer func() { _ = f.Close() }()
	return parseChangelog(filepath.Base(path), f)
}

// lastRelease returns the newest release that tags the module whose tags
// begin with prefix ("" for the root module, "kube/" for the module in
// kube), its tag of the module, and the names of the changes recorded
// since: in Unreleased and in any newer release that didn't tag the
// module. ok is false if the module has no release yet.
func (cl changelog) lastRelease(prefix string) (rel release, tag string, since map[string]bool, ok bool) {
	since = map[string]bool{}
	for n := range cl.unreleased.names {
		since[n] = true
	}
	for _, r := range cl.releases {
		for _, t := range r.tags {
			if strings.HasPrefix(t, prefix) && !strings.Contains(t[len(prefix):], "/") {
				return r, t, since, true
			}
		}
		for n := range r.names {
			since[n] = true
		}
	}
	return release{}, "", since, false
}

// qualifiedName cuts a code span at its first character that can't be in
// a qualified Go name (kube.Client.Get, kube/kubeenv.Connection), after a
// leading * or (, so `(*kube.Client).Get` names kube.Client.Get and
// `kube.NewController(...)` names kube.NewController.
func qualifiedName(span string) string {
	span = strings.TrimSpace(span)
	if strings.HasPrefix(span, "(") {
		if end := strings.Index(span, ")"); end > 0 {
			span = span[1:end] + span[end+1:]
		}
	}
	span = strings.TrimLeft(span, "*")
	end := strings.IndexFunc(span, func(r rune) bool {
		inName := r == '.' || r == '/' || r == '_' || r == '-' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
		return !inName
	})
	if end >= 0 {
		span = span[:end]
	}
	return strings.Trim(span, ".")
}
