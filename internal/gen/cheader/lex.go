package cheader

import (
	"fmt"
	"strings"
)

// TokKind classifies a token.
type TokKind int

// Token kinds.
const (
	Ident TokKind = iota
	Number
	Punct
	String
)

// Token is one C token. Pos is "file:line" for error messages.
type Token struct {
	Kind TokKind
	Text string
	Pos  string
}

func (t Token) String() string { return t.Text }

// stripComments removes /* */ and // comments, keeping newlines so that line
// numbers survive, and leaves string and character literals alone.
func stripComments(src string) (string, error) {
	var b strings.Builder
	b.Grow(len(src))
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return "", fmt.Errorf("unterminated comment")
			}
			body := src[i : i+2+end+2]
			b.WriteByte(' ')
			b.WriteString(strings.Repeat("\n", strings.Count(body, "\n")))
			i += len(body)
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			i += end
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					break
				}
				j++
			}
			if j >= len(src) || src[j] != c {
				return "", fmt.Errorf("unterminated literal")
			}
			b.WriteString(src[i : j+1])
			i = j + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}

var puncts3 = []string{"<<=", ">>=", "..."}
var puncts2 = []string{"##", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "++", "--", "+=", "-=", "*=", "/=", "|=", "&=", "^=", "::"}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// tokenize splits one logical line into tokens.
func tokenize(line, pos string) ([]Token, error) {
	var toks []Token
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n':
			i++
		case isIdentStart(c):
			j := i + 1
			for j < len(line) && isIdentChar(line[j]) {
				j++
			}
			toks = append(toks, Token{Ident, line[i:j], pos})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '9':
			j := i + 1
			for j < len(line) && (isIdentChar(line[j]) || line[j] == '.' ||
				(line[j] == '+' || line[j] == '-') && (line[j-1] == 'e' || line[j-1] == 'E') && !strings.HasPrefix(line[i:], "0x")) {
				j++
			}
			toks = append(toks, Token{Number, line[i:j], pos})
			i = j
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(line) && line[j] != c {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(line) {
				return nil, fmt.Errorf("%s: unterminated literal", pos)
			}
			toks = append(toks, Token{String, line[i : j+1], pos})
			i = j + 1
		default:
			n := 1
			for _, p := range puncts3 {
				if strings.HasPrefix(line[i:], p) {
					n = 3
				}
			}
			if n == 1 {
				for _, p := range puncts2 {
					if strings.HasPrefix(line[i:], p) {
						n = 2
					}
				}
			}
			if n == 1 && !strings.ContainsRune("{}[]()<>;,:*&|^~!=+-/%?#.", rune(c)) {
				return nil, fmt.Errorf("%s: unexpected character %q", pos, c)
			}
			toks = append(toks, Token{Punct, line[i : i+n], pos})
			i += n
		}
	}
	return toks, nil
}
