package readme_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A block is one fenced code block of a Markdown file.
type block struct {
	fence  int    // line of the opening fence, from 1
	lang   string // the first word of the info string: "go", "json", ""
	text   string // the lines between the fences
	skip   bool   // <!-- not compiled: reason --> came before it
	reason string
	cont   bool // <!-- compiled: continues the program above --> came before it
}

const continues = "compiled: continues the program above"

var (
	commentRE     = regexp.MustCompile(`^<!--\s*(.*?)\s*-->$`)
	notCompiledRE = regexp.MustCompile(`^not compiled:\s*(\S.*)$`)
)

// parseBlocks returns the fenced code blocks of md (``` or ~~~, indented by
// at most three spaces, as in CommonMark), with the directive on the last
// non-blank line before each. name is md's name in errors.
func parseBlocks(name, md string) ([]block, error) {
	lines := strings.Split(md, "\n")
	var blocks []block
	var errs []error
	prev, prevLine := "", 0 // the last non-blank line outside a block
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r")
		indent, fence, info, ok := openFence(line)
		if !ok {
			if s := strings.TrimSpace(line); s != "" {
				prev, prevLine = s, i+1
			}
			continue
		}
		b := block{fence: i + 1, lang: strings.ToLower(firstWord(info))}
		if m := commentRE.FindStringSubmatch(prev); m != nil && strings.Contains(m[1], "compiled") {
			if m[1] == continues {
				b.cont = true
			} else if r := notCompiledRE.FindStringSubmatch(m[1]); r != nil {
				b.skip, b.reason = true, r[1]
			} else {
				errs = append(errs, fmt.Errorf("%s:%d: %s: not a directive; write <!-- not compiled: the reason --> or <!-- %s -->", name, prevLine, prev, continues))
			}
			if (b.skip || b.cont) && b.lang != "go" {
				errs = append(errs, fmt.Errorf("%s:%d: %s comes before a block that is not go (%q)", name, prevLine, prev, b.lang))
			}
		}
		prev = ""
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := strings.TrimRight(lines[i], "\r")
			if closesFence(l, fence) {
				closed = true
				break
			}
			body = append(body, trimIndent(l, indent))
		}
		if !closed {
			errs = append(errs, fmt.Errorf("%s:%d: the block is never closed", name, b.fence))
		}
		b.text = strings.Join(body, "\n")
		blocks = append(blocks, b)
	}
	return blocks, errors.Join(errs...)
}

// openFence reports whether line opens a fenced block, and returns its
// indentation, its fence (``` or longer, ~~~ or longer) and its info string.
func openFence(line string) (indent int, fence, info string, ok bool) {
	rest := strings.TrimLeft(line, " ")
	indent = len(line) - len(rest)
	if indent > 3 || rest == "" || (rest[0] != '`' && rest[0] != '~') {
		return 0, "", "", false
	}
	n := len(rest) - len(strings.TrimLeft(rest, rest[:1]))
	if n < 3 {
		return 0, "", "", false
	}
	fence, info = rest[:n], strings.TrimSpace(rest[n:])
	if fence[0] == '`' && strings.Contains(info, "`") {
		return 0, "", "", false
	}
	return indent, fence, info, true
}

// closesFence reports whether line closes a block opened with fence.
func closesFence(line, fence string) bool {
	rest := strings.TrimLeft(line, " ")
	if len(line)-len(rest) > 3 {
		return false
	}
	marks := strings.TrimLeft(rest, fence[:1])
	return len(rest)-len(marks) >= len(fence) && strings.TrimSpace(marks) == ""
}

// trimIndent removes up to n leading spaces, as CommonMark does for the
// content of a fence indented by n.
func trimIndent(line string, n int) string {
	for n > 0 && strings.HasPrefix(line, " ") {
		line, n = line[1:], n-1
	}
	return line
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

func TestParseBlocksFencesAndDirectives(t *testing.T) {
	md := strings.Join([]string{
		"# Title", // 1
		"```",     // 2
		"go get x",
		"```",
		"<!-- a comment of no interest -->", // 5
		"```go",
		"package main",
		"```",
		"<!-- not compiled: pseudo-code -->", // 9
		"",
		"```go title",
		"x := ...",
		"```",
		"<!-- compiled: continues the program above -->", // 14
		"````go",
		"s := \"```\"",
		"````",
		"  ~~~Go", // 18
		"    y := 1",
		"  ~~~~",
		"```json",
		"{}",
		"```",
	}, "\n")
	blocks, err := parseBlocks("DOC.md", md)
	require.NoError(t, err)
	require.Len(t, blocks, 6)
	assert.Equal(t, block{fence: 2, lang: "", text: "go get x"}, blocks[0])
	assert.Equal(t, block{fence: 6, lang: "go", text: "package main"}, blocks[1], "an unrelated comment is no directive")
	assert.Equal(t, block{fence: 11, lang: "go", text: "x := ...", skip: true, reason: "pseudo-code"}, blocks[2])
	assert.Equal(t, block{fence: 15, lang: "go", text: "s := \"```\"", cont: true}, blocks[3], "a longer fence holds a shorter one")
	assert.Equal(t, block{fence: 18, lang: "go", text: "  y := 1"}, blocks[4], "the fence's indentation is removed")
	assert.Equal(t, block{fence: 21, lang: "json", text: "{}"}, blocks[5])
}

func TestParseBlocksRejectsWhatItCannotRead(t *testing.T) {
	for _, c := range []struct{ name, md, want string }{
		{"misspelt directive", "<!-- compiled: continuing -->\n```go\nx\n```", "DOC.md:1: <!-- compiled: continuing -->: not a directive"},
		{"reason missing", "<!-- not compiled: -->\n```go\nx\n```", "DOC.md:1: <!-- not compiled: -->: not a directive"},
		{"directive on a shell block", "<!-- not compiled: shell -->\n```sh\nls\n```", `comes before a block that is not go ("sh")`},
		{"unclosed", "text\n```go\nx := 1\n", "DOC.md:2: the block is never closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseBlocks("DOC.md", c.md)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
