package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README is the newcomer's guide and docs/ the manual: every relative
// link in them must lead to a file of the repository and, with a #anchor,
// to a heading of that file, and the README must stay short.

// maxReadmeLines bounds README.md: what does not fit belongs in docs/.
const maxReadmeLines = 300

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines; keep it at most %d and move the rest into docs/", n, maxReadmeLines)
	}
}

func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	if len(pages) < 2 {
		t.Fatalf("no pages in docs/: %v", pages)
	}
	anchors := map[string]map[string]bool{} // by cleaned path, read once
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			if err := checkLink(page, l.target, anchors); err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, l.target, err)
			}
		}
	}
}

// checkLink reports why target, a link on page, does not resolve; nil when
// it does or when it is not relative (a URL with a scheme).
func checkLink(page, target string, anchors map[string]map[string]bool) error {
	if isAbsoluteURL(target) {
		return nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		rel, err := filepath.Rel(repoRoot, file)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("leads outside the repository")
		}
		info, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("no such file")
		}
		if info.IsDir() {
			if anchor != "" {
				return fmt.Errorf("an anchor on a directory")
			}
			return nil
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("an anchor into a file that is not Markdown")
	}
	key := filepath.Clean(file)
	if anchors[key] == nil {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		anchors[key] = headingAnchors(string(b))
	}
	if !anchors[key][anchor] {
		return fmt.Errorf("%s has no heading with anchor #%s", filepath.Base(file), anchor)
	}
	return nil
}

var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func isAbsoluteURL(target string) bool { return schemeRE.MatchString(target) }

// link is one Markdown link's target and the line it is on.
type link struct {
	target string
	line   int
}

var (
	// linkRE matches an inline link or image, [text](target) or
	// [text](target "title"); text may hold one level of brackets.
	linkRE = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// codeSpanRE matches an inline code span, whose text is not Markdown.
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
)

// markdownLinks returns the inline links of a Markdown text, outside code
// blocks (fenced, or indented by four spaces after a blank line) and code
// spans.
func markdownLinks(text string) []link {
	var links []link
	for i, line := range proseLines(text) {
		if line == "" {
			continue
		}
		line = codeSpanRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			links = append(links, link{target: m[1], line: i + 1})
		}
	}
	return links
}

// proseLines returns text's lines with those inside code blocks blanked,
// so that indices stay line numbers.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	out := make([]string, len(lines))
	fence := ""
	blank, indented := true, false // the previous line was blank; in an indented block
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		wasBlank := blank
		blank = strings.TrimSpace(line) == ""
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			continue
		case blank:
			continue
		case strings.HasPrefix(line, "    ") && (wasBlank || indented):
			indented = true
			continue
		}
		indented = false
		out[i] = line
	}
	return out
}

var (
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	// inlineLinkRE keeps a link's text and drops its target, as the
	// rendered heading does.
	inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// notAnchorRE is what GitHub drops from a heading's text to make its
	// anchor: anything but letters, marks, digits, connector punctuation
	// (the underscore), hyphens and spaces.
	notAnchorRE = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc}\- ]`)
)

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: the heading's text lower-cased, punctuation dropped,
// spaces as hyphens, and -1, -2, … appended to repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := githubAnchor(m[2])
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func githubAnchor(heading string) string {
	text := inlineLinkRE.ReplaceAllString(heading, "$1")
	text = notAnchorRE.ReplaceAllString(strings.ToLower(text), "")
	return strings.ReplaceAll(text, " ", "-")
}

func TestGithubAnchor(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"The two commands", "the-two-commands"},
		{"Weighted jobs: `Shaper-Cost`", "weighted-jobs-shaper-cost"},
		{"Learning the downstream's limit", "learning-the-downstreams-limit"},
		{"Per downstream: `downstreams.NAME.`", "per-downstream-downstreamsname"},
		{"See [the docs](docs/README.md) now", "see-the-docs-now"},
		{"max_wait and **more**", "max_wait-and-more"},
	} {
		if got := githubAnchor(c.heading); got != c.want {
			t.Errorf("githubAnchor(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestMarkdownLinks(t *testing.T) {
	text := "# T\n\nSee [a](a.md#x) and ![img](p.png \"title\") and `[not](code.md)`.\n\n" +
		"    [indented](code.md)\n\n```\n[fenced](code.md)\n```\n[b [c]](b.md)\n"
	var got []string
	for _, l := range markdownLinks(text) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := []string{"3:a.md#x", "3:p.png", "10:b.md"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("markdownLinks = %v, want %v", got, want)
	}
	anchors := headingAnchors("# A\n## A\n```\n# not\n```\n## B\n")
	for _, a := range []string{"a", "a-1", "b"} {
		if !anchors[a] {
			t.Errorf("headingAnchors lacks %q: %v", a, anchors)
		}
	}
	if anchors["not"] {
		t.Errorf("headingAnchors took a heading inside a code block: %v", anchors)
	}
}
