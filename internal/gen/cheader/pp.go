package cheader

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Macro is a #define. Params is nil for an object-like macro.
type Macro struct {
	Name   string
	Params []string
	Func   bool
	Body   []Token
}

// Preprocessor is a small C preprocessor: conditionals, object-like and
// function-like macros with ## pasting. #include is ignored: each header is
// read on its own, and the caller feeds them in dependency order.
type Preprocessor struct {
	Macros map[string]*Macro
	// Order lists macro names in definition order (for constant emission).
	Order []string
	// Defines records the file position of each #define (first one).
	Pos map[string]string
}

// NewPreprocessor returns a preprocessor with the given predefined macros
// (name → value text).
func NewPreprocessor(predefined map[string]string) *Preprocessor {
	p := &Preprocessor{Macros: map[string]*Macro{}, Pos: map[string]string{}}
	for name, val := range predefined {
		toks, _ := tokenize(val, "<predefined>")
		p.Macros[name] = &Macro{Name: name, Body: toks}
	}
	return p
}

type cond struct {
	active   bool // this branch is taken
	taken    bool // some branch of this #if was taken
	parentOn bool
}

// Run preprocesses src and returns the tokens of the active lines, macro-expanded.
func (p *Preprocessor) Run(file, src string) ([]Token, error) {
	src, err := stripComments(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	rawLines := strings.Split(src, "\n")
	var out []Token
	var stack []cond
	on := func() bool { return len(stack) == 0 || stack[len(stack)-1].active }
	for i := 0; i < len(rawLines); i++ {
		line := rawLines[i]
		lineNo := i + 1
		for strings.HasSuffix(line, "\\") && i+1 < len(rawLines) {
			line = line[:len(line)-1] + " " + rawLines[i+1]
			i++
		}
		pos := fmt.Sprintf("%s:%d", file, lineNo)
		trim := strings.TrimSpace(line)
		if !strings.HasPrefix(trim, "#") {
			if !on() || trim == "" {
				continue
			}
			toks, err := tokenize(line, pos)
			if err != nil {
				return nil, err
			}
			exp, err := p.expand(toks, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pos, err)
			}
			out = append(out, exp...)
			continue
		}
		dir := strings.TrimSpace(trim[1:])
		name := dir
		rest := ""
		if k := strings.IndexFunc(dir, func(r rune) bool { return r == ' ' || r == '\t' || r == '(' }); k >= 0 {
			name, rest = dir[:k], strings.TrimSpace(dir[k:])
		}
		switch name {
		case "if", "ifdef", "ifndef":
			parent := on()
			v := false
			if parent {
				switch name {
				case "ifdef":
					_, v = p.Macros[strings.TrimSpace(rest)]
				case "ifndef":
					_, v = p.Macros[strings.TrimSpace(rest)]
					v = !v
				default:
					v, err = p.evalCond(rest, pos)
					if err != nil {
						return nil, err
					}
				}
			}
			stack = append(stack, cond{active: parent && v, taken: v, parentOn: parent})
		case "elif":
			if len(stack) == 0 {
				return nil, fmt.Errorf("%s: #elif without #if", pos)
			}
			c := &stack[len(stack)-1]
			if c.taken || !c.parentOn {
				c.active = false
				continue
			}
			v, err := p.evalCond(rest, pos)
			if err != nil {
				return nil, err
			}
			c.active, c.taken = v, v
		case "else":
			if len(stack) == 0 {
				return nil, fmt.Errorf("%s: #else without #if", pos)
			}
			c := &stack[len(stack)-1]
			c.active = c.parentOn && !c.taken
			c.taken = true
		case "endif":
			if len(stack) == 0 {
				return nil, fmt.Errorf("%s: #endif without #if", pos)
			}
			stack = stack[:len(stack)-1]
		case "define":
			if on() {
				if err := p.define(rest, pos); err != nil {
					return nil, err
				}
			}
		case "undef":
			if on() {
				delete(p.Macros, strings.TrimSpace(rest))
			}
		case "error":
			if on() {
				return nil, fmt.Errorf("%s: #error %s", pos, rest)
			}
		case "include", "pragma", "warning", "":
		default:
			return nil, fmt.Errorf("%s: unknown directive #%s", pos, name)
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("%s: unterminated #if", file)
	}
	return out, nil
}

func (p *Preprocessor) define(rest, pos string) error {
	j := 0
	for j < len(rest) && isIdentChar(rest[j]) {
		j++
	}
	if j == 0 {
		return fmt.Errorf("%s: bad #define", pos)
	}
	m := &Macro{Name: rest[:j]}
	body := rest[j:]
	if strings.HasPrefix(body, "(") {
		end := strings.IndexByte(body, ')')
		if end < 0 {
			return fmt.Errorf("%s: bad macro parameters", pos)
		}
		m.Func = true
		for _, prm := range strings.Split(body[1:end], ",") {
			if prm = strings.TrimSpace(prm); prm != "" {
				m.Params = append(m.Params, prm)
			}
		}
		body = body[end+1:]
	}
	toks, err := tokenize(body, pos)
	if err != nil {
		return err
	}
	m.Body = toks
	if _, seen := p.Macros[m.Name]; !seen {
		p.Order = append(p.Order, m.Name)
		p.Pos[m.Name] = pos
	}
	p.Macros[m.Name] = m
	return nil
}

// expand macro-expands toks; hide holds the macros being expanded.
func (p *Preprocessor) expand(toks []Token, hide map[string]bool) ([]Token, error) {
	var out []Token
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		m, ok := p.Macros[t.Text]
		if t.Kind != Ident || !ok || hide[t.Text] {
			out = append(out, t)
			continue
		}
		h := map[string]bool{t.Text: true}
		for k := range hide {
			h[k] = true
		}
		if !m.Func {
			exp, err := p.expand(retag(m.Body, t.Pos), h)
			if err != nil {
				return nil, err
			}
			out = append(out, exp...)
			continue
		}
		if i+1 >= len(toks) || toks[i+1].Text != "(" {
			out = append(out, t)
			continue
		}
		args, next, err := collectArgs(toks, i+1)
		if err != nil {
			return nil, err
		}
		i = next
		if len(args) != len(m.Params) && !(len(m.Params) == 0 && len(args) == 1 && len(args[0]) == 0) {
			return nil, fmt.Errorf("macro %s: %d arguments, want %d", m.Name, len(args), len(m.Params))
		}
		body, err := p.substitute(m, args, h)
		if err != nil {
			return nil, err
		}
		exp, err := p.expand(retag(body, t.Pos), h)
		if err != nil {
			return nil, err
		}
		out = append(out, exp...)
	}
	return out, nil
}

func retag(toks []Token, pos string) []Token {
	out := make([]Token, len(toks))
	for i, t := range toks {
		t.Pos = pos
		out[i] = t
	}
	return out
}

// collectArgs reads a parenthesised, comma-separated argument list starting at
// toks[open] == "(" and returns the arguments and the index of the ")".
func collectArgs(toks []Token, open int) ([][]Token, int, error) {
	depth := 0
	var args [][]Token
	var cur []Token
	for i := open; i < len(toks); i++ {
		t := toks[i]
		switch t.Text {
		case "(":
			depth++
			if depth == 1 {
				continue
			}
		case ")":
			depth--
			if depth == 0 {
				args = append(args, cur)
				return args, i, nil
			}
		case ",":
			if depth == 1 {
				args = append(args, cur)
				cur = nil
				continue
			}
		}
		cur = append(cur, t)
	}
	return nil, 0, fmt.Errorf("unterminated macro arguments")
}

func (p *Preprocessor) substitute(m *Macro, args [][]Token, hide map[string]bool) ([]Token, error) {
	idx := map[string]int{}
	for i, name := range m.Params {
		idx[name] = i
	}
	var out []Token
	body := m.Body
	for i := 0; i < len(body); i++ {
		t := body[i]
		if t.Text == "##" && len(out) > 0 && i+1 < len(body) {
			right := []Token{body[i+1]}
			if k, ok := idx[body[i+1].Text]; ok {
				right = args[k]
			}
			i++
			if len(right) == 0 {
				continue
			}
			left := out[len(out)-1]
			pasted := left.Text + right[0].Text
			kind := Ident
			if !isIdentStart(pasted[0]) {
				kind = Number
			}
			out[len(out)-1] = Token{kind, pasted, left.Pos}
			out = append(out, right[1:]...)
			continue
		}
		if k, ok := idx[t.Text]; ok && t.Kind == Ident {
			pasteNext := i+1 < len(body) && body[i+1].Text == "##"
			if pasteNext {
				out = append(out, args[k]...)
			} else {
				exp, err := p.expand(args[k], hide)
				if err != nil {
					return nil, err
				}
				out = append(out, exp...)
			}
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

func (p *Preprocessor) evalCond(expr, pos string) (bool, error) {
	toks, err := tokenize(expr, pos)
	if err != nil {
		return false, err
	}
	// Replace defined(X) / defined X before expansion.
	var pre []Token
	for i := 0; i < len(toks); i++ {
		if toks[i].Text == "defined" {
			name := ""
			if i+1 < len(toks) && toks[i+1].Text == "(" && i+3 < len(toks) {
				name = toks[i+2].Text
				i += 3
			} else if i+1 < len(toks) {
				name = toks[i+1].Text
				i++
			}
			v := "0"
			if _, ok := p.Macros[name]; ok {
				v = "1"
			}
			pre = append(pre, Token{Number, v, pos})
			continue
		}
		pre = append(pre, toks[i])
	}
	exp, err := p.expand(pre, nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", pos, err)
	}
	v, err := EvalConst(exp, func(string) (int64, bool) { return 0, true })
	if err != nil {
		return false, fmt.Errorf("%s: #if %s: %w", pos, expr, err)
	}
	return v != 0, nil
}

// ExpandMacro returns the expansion of an object-like macro.
func (p *Preprocessor) ExpandMacro(name string) ([]Token, error) {
	m, ok := p.Macros[name]
	if !ok || m.Func {
		return nil, fmt.Errorf("no object-like macro %s", name)
	}
	return p.expand(m.Body, map[string]bool{name: true})
}

// EvalConst evaluates a C integer constant expression. lookup resolves
// identifiers (enumerators, or 0 in #if).
func EvalConst(toks []Token, lookup func(string) (int64, bool)) (int64, error) {
	e := &evaluator{toks: toks, lookup: lookup}
	v, err := e.ternary()
	if err != nil {
		return 0, err
	}
	if e.i != len(toks) {
		return 0, fmt.Errorf("unexpected %q in constant expression", toks[e.i].Text)
	}
	return v, nil
}

type evaluator struct {
	toks   []Token
	i      int
	lookup func(string) (int64, bool)
}

func (e *evaluator) peek() string {
	if e.i < len(e.toks) {
		return e.toks[e.i].Text
	}
	return ""
}

func (e *evaluator) ternary() (int64, error) {
	c, err := e.binary(0)
	if err != nil || e.peek() != "?" {
		return c, err
	}
	e.i++
	a, err := e.ternary()
	if err != nil {
		return 0, err
	}
	if e.peek() != ":" {
		return 0, errors.New("missing colon in a conditional expression")
	}
	e.i++
	b, err := e.ternary()
	if err != nil {
		return 0, err
	}
	if c != 0 {
		return a, nil
	}
	return b, nil
}

var precedence = map[string]int{
	"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
	"<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (e *evaluator) binary(min int) (int64, error) {
	l, err := e.unary()
	if err != nil {
		return 0, err
	}
	for {
		op := e.peek()
		prec, ok := precedence[op]
		if !ok || prec <= min {
			return l, nil
		}
		e.i++
		r, err := e.binary(prec)
		if err != nil {
			return 0, err
		}
		switch op {
		case "||":
			l = b2i(l != 0 || r != 0)
		case "&&":
			l = b2i(l != 0 && r != 0)
		case "|":
			l |= r
		case "^":
			l ^= r
		case "&":
			l &= r
		case "==":
			l = b2i(l == r)
		case "!=":
			l = b2i(l != r)
		case "<":
			l = b2i(l < r)
		case ">":
			l = b2i(l > r)
		case "<=":
			l = b2i(l <= r)
		case ">=":
			l = b2i(l >= r)
		case "<<":
			if r < 0 || r > 63 {
				return 0, fmt.Errorf("shift count %d out of range", r)
			}
			l <<= uint(r)
		case ">>":
			if r < 0 || r > 63 {
				return 0, fmt.Errorf("shift count %d out of range", r)
			}
			l >>= uint(r)
		case "+":
			l += r
		case "-":
			l -= r
		case "*":
			l *= r
		case "/", "%":
			if r == 0 {
				return 0, fmt.Errorf("division by zero")
			}
			if op == "/" {
				l /= r
			} else {
				l %= r
			}
		}
	}
}

func (e *evaluator) unary() (int64, error) {
	if e.i >= len(e.toks) {
		return 0, fmt.Errorf("unexpected end of constant expression")
	}
	t := e.toks[e.i]
	e.i++
	switch {
	case t.Text == "-":
		v, err := e.unary()
		return -v, err
	case t.Text == "+":
		return e.unary()
	case t.Text == "!":
		v, err := e.unary()
		return b2i(v == 0), err
	case t.Text == "~":
		v, err := e.unary()
		return ^v, err
	case t.Text == "(":
		// A cast to an integer type: skip it.
		if e.i < len(e.toks) && isTypeWord(e.toks[e.i].Text) {
			for e.i < len(e.toks) && e.toks[e.i].Text != ")" {
				if !isTypeWord(e.toks[e.i].Text) {
					return 0, fmt.Errorf("unsupported cast")
				}
				e.i++
			}
			e.i++
			return e.unary()
		}
		v, err := e.ternary()
		if err != nil {
			return 0, err
		}
		if e.peek() != ")" {
			return 0, fmt.Errorf("missing )")
		}
		e.i++
		return v, nil
	case t.Kind == Number:
		return parseIntLit(t.Text)
	case t.Kind == String && strings.HasPrefix(t.Text, "'"):
		s, err := strconv.Unquote(t.Text)
		if err != nil || len(s) != 1 {
			return 0, fmt.Errorf("bad character literal %s", t.Text)
		}
		return int64(s[0]), nil
	case t.Kind == Ident:
		v, ok := e.lookup(t.Text)
		if !ok {
			return 0, fmt.Errorf("unknown identifier %s", t.Text)
		}
		return v, nil
	}
	return 0, fmt.Errorf("unexpected %q in constant expression", t.Text)
}

func isTypeWord(s string) bool {
	switch s {
	case "int", "unsigned", "signed", "long", "short", "char":
		return true
	}
	return false
}

func parseIntLit(s string) (int64, error) {
	t := strings.TrimRight(s, "uUlL")
	if t == "" {
		return 0, fmt.Errorf("bad number %q", s)
	}
	u, err := strconv.ParseUint(t, 0, 64)
	if err != nil {
		if len(t) > 1 && t[0] == '0' && t[1] >= '0' && t[1] <= '9' {
			u, err = strconv.ParseUint(t[1:], 8, 64)
		}
		if err != nil {
			return 0, fmt.Errorf("bad number %q", s)
		}
	}
	return int64(u), nil
}
