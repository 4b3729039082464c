package driver_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/nvrtc"
)

// The damaged-image test runs its loads in child processes (this test
// binary again, with mutationsEnv naming a directory of images), so that a
// crash inside libcuda is reported with the image that caused it instead of
// ending the test run; after a crash the next child goes on with the next
// image (for a bit flip in a field, the next field: one crash says the
// field needs checking), so one run lists every field that crashes. The
// single-bit list, about 170,000 images, took some 20 seconds on an H100;
// the multi-byte strategies add perStrategy() images each (5,000 by
// default; the closing run of a change to the check sets 100,000 with
// PURECUDA_IMAGE_MUTATIONS_PER_STRATEGY and raises the budget).
const (
	mutationsEnv       = "PURECUDA_IMAGE_MUTATIONS"
	mutationsBudgetEnv = "PURECUDA_IMAGE_MUTATIONS_BUDGET" // seconds for the whole test; default 150
	maxCrashes         = 50                                // fields (and truncations) found to crash, hang or break the process
	hangAfter          = 30 * time.Second                  // a child silent this long is stuck in a load
	healthEvery        = 500                               // a child checks, every this many images, that a good CUBIN still loads
)

// mutation is one damaged image: src with bit bit of byte at flipped; or
// src cut to n bytes (n > 0); or src with the set bytes at at replaced by
// val, little-endian (set > 0); or src with the run bytes at at set to
// fill, or to random bytes from seed when fill is -1 (run > 0).
type mutation struct {
	group, src string
	at         int
	bit        uint
	n          int
	set        int
	val        uint64
	run, fill  int
	seed       uint64
}

// image builds m's damaged image from the undamaged ones.
func (m mutation) image(srcs map[string][]byte) []byte {
	s := srcs[m.src]
	if m.n > 0 {
		return bytes.Clone(s[:m.n])
	}
	b := bytes.Clone(s)
	if m.run > 0 {
		r := rand.New(rand.NewPCG(m.seed, 5))
		for i := range m.run {
			if m.fill < 0 {
				b[m.at+i] = byte(r.Uint32())
			} else {
				b[m.at+i] = byte(m.fill)
			}
		}
		return b
	}
	if m.set > 0 {
		for i := range m.set {
			b[m.at+i] = byte(m.val >> (8 * i))
		}
		return b
	}
	b[m.at] ^= 1 << m.bit
	return b
}

// describe says what m damaged, naming the field.
func (m mutation) describe(srcs map[string][]byte) string {
	s := srcs[m.src]
	if m.n > 0 {
		what, _ := locate(m.src, s, m.n)
		return fmt.Sprintf("%s cut to %d of %d bytes (inside %s)", m.src, m.n, len(s), what)
	}
	what, f := locate(m.src, s, m.at)
	if m.run > 0 {
		with := "random bytes"
		if m.fill >= 0 {
			with = fmt.Sprintf("0x%02x", m.fill)
		}
		return fmt.Sprintf("%s bytes %d to %d, from %s on, set to %s", m.src, m.at, m.at+m.run-1, what, with)
	}
	if m.set > 0 {
		return fmt.Sprintf("%s byte %d: %s, %s set to 0x%x", m.src, m.at, what, f.value(s), m.val)
	}
	desc := fmt.Sprintf("%s byte %d bit %d: %s", m.src, m.at, m.bit, what)
	if was := f.value(s); was != "" {
		if f.len > 1 {
			desc += fmt.Sprintf(" (its byte %d)", m.at-f.off)
		}
		desc += fmt.Sprintf(", %s → %s", was, f.value(m.image(srcs)))
	}
	return desc
}

// field names the field m flips, "" for a truncation.
func (m mutation) field(srcs map[string][]byte) string {
	if m.n > 0 {
		return ""
	}
	what, f := locate(m.src, srcs[m.src], m.at)
	if f.name == "byte" {
		return fmt.Sprintf("%s byte %d", m.src, m.at)
	}
	return fmt.Sprintf("%s %s at %d", m.src, what, f.off)
}

// locate names the field of undamaged image src (named name) at off.
func locate(name string, src []byte, off int) (string, field) {
	switch {
	case off >= len(src):
		return "the end", field{}
	case name == "ptx":
		return "PTX text", field{"byte", off, 1}
	case bytes.HasPrefix(src, []byte("\x7fELF")):
		return readELF(src).describe(src, off)
	default:
		return readFatbin(src).describe(src, off)
	}
}

// cubinSources are the CUBINs the test damages: NVRTC's for the device,
// the same with -G (debug sections) and -rdc (a relocatable CUBIN), and
// imageRichSrc's (more kinds of .nv.info records and relocations).
var cubinSources = []string{"cubin", "cubin-G", "cubin-rdc", "cubin-rich"}

// mutationsOf lists the damaged images, most telling first: for each CUBIN,
// every bit of its ELF, program and section headers, every bit of the
// contents of its symbol tables, relocations, notes and CUDA sections, and
// each header field set to 0, to all ones and to one more and one less;
// every bit of the fatbins' headers and entry headers; random bit flips;
// every truncation of the binary images; as PTX makes the driver compile,
// a few hundred of the PTX's truncations and flips; and the multi-byte
// damage inside the CUBINs' sections (image_damage_strategies_test.go).
func mutationsOf(srcs map[string][]byte) []mutation {
	var ms []mutation
	every := func(group, src string, at []int) {
		for _, a := range at {
			for bit := range uint(8) {
				ms = append(ms, mutation{group: group, src: src, at: a, bit: bit})
			}
		}
	}
	values := func(group, src string, fs []field) {
		b := srcs[src]
		for _, f := range fs {
			var was uint64
			for i := range f.len {
				was |= uint64(b[f.off+i]) << (8 * i)
			}
			ones := uint64(1)<<(8*f.len) - 1
			if f.len == 8 {
				ones = ^uint64(0)
			}
			for _, v := range []uint64{0, ones, (was + 1) & ones, (was - 1) & ones} {
				if v != was {
					ms = append(ms, mutation{group: group, src: src, at: f.off, set: f.len, val: v})
				}
			}
		}
	}
	random := func(group, src string, k int) {
		r := rand.New(rand.NewPCG(uint64(len(srcs[src])), 13))
		for range k {
			ms = append(ms, mutation{group: group, src: src, at: r.IntN(len(srcs[src])), bit: uint(r.IntN(8))})
		}
	}
	cuts := func(group, src string, step int) {
		for n := 1; n < len(srcs[src]); n += step {
			ms = append(ms, mutation{group: group, src: src, n: n})
		}
	}
	var cubins, fatbins []string
	for _, c := range cubinSources {
		if srcs[c] != nil {
			cubins = append(cubins, c)
		}
	}
	for _, f := range []string{"fatbin", "nvcc-fatbin"} {
		if srcs[f] != nil {
			fatbins = append(fatbins, f)
		}
	}
	for _, c := range cubins {
		l := readELF(srcs[c])
		every(c+" headers", c, l.headerBytes())
		every(c+" structured sections", c, l.structuredBytes())
		values(c+" header values", c, l.headerFields())
	}
	for _, f := range fatbins {
		every(f+" headers", f, readFatbin(srcs[f]).headerBytes())
	}
	for _, c := range cubins {
		random(c+" random flips", c, 2000)
	}
	for _, f := range fatbins {
		random(f+" random flips", f, 1500)
	}
	for _, b := range append(cubins, fatbins...) {
		cuts(b+" truncations", b, 1)
	}
	ms = append(ms, multiByteMutations(srcs, cubins, perStrategy())...)
	cuts("ptx truncations", "ptx", max(1, len(srcs["ptx"])/150))
	random("ptx random flips", "ptx", 150)
	return ms
}

// TestImageDamagedNeverCrash loads damaged CUBINs, fatbins and PTX (see
// mutationsOf) with LoadModule and LoadLibrary, and looks up a kernel in
// what loads: each may load or fail with an error, none may crash or hang
// the process or leave the context unable to load a good CUBIN. It reports
// every such image (up to maxCrashes), naming the damaged field, and fails
// too when the time budget ran out before every image was tried.
func TestImageDamagedNeverCrash(t *testing.T) {
	if dir := os.Getenv(mutationsEnv); dir != "" {
		runMutations(t, dir)
		return
	}
	e, _ := setup(t)
	im := compileImages(t, e.dev)
	dir := t.TempDir()
	srcs := map[string][]byte{"cubin": im.cubin, "fatbin": im.fatBoth, "ptx": im.ptx}
	for name, o := range map[string]nvrtc.Options{
		"cubin-G":    {Arch: e.dev.Arch(), Debug: true},
		"cubin-rdc":  {Arch: e.dev.Arch(), RelocatableDeviceCode: true},
		"cubin-rich": {Arch: e.dev.Arch()},
	} {
		code := imageSrc
		if name == "cubin-rich" {
			code = imageRichSrc
		}
		res, err := nvrtc.Compile(code, o)
		require.NoError(t, err, name)
		srcs[name] = res.CUBIN
	}
	if bin := nvcc(); bin != "" {
		if fat, _, err := nvccImages(t, bin, e.dev); err == nil {
			srcs["nvcc-fatbin"] = fat
		}
	}
	for name, b := range srcs {
		mod, err := e.ctx.LoadModule(b)
		require.NoError(t, err, "the undamaged %s must load", name)
		require.NoError(t, mod.Close())
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	ms := mutationsOf(srcs)
	budget := 150 * time.Second
	if s, err := strconv.Atoi(os.Getenv(mutationsBudgetEnv)); err == nil && s > 0 {
		budget = time.Duration(s) * time.Second
	}
	if d, ok := t.Deadline(); ok {
		budget = min(budget, time.Until(d)-30*time.Second)
	}
	deadline := time.Now().Add(budget)
	began := time.Now()
	tally := map[string]map[string]int{} // group → outcome → count
	var findings []string
	start, children := 0, 0
	for start < len(ms) && len(findings) < maxCrashes && time.Now().Before(deadline) {
		children++
		r := runChild(t, dir, start, deadline)
		for _, o := range r.outcomes {
			g := ms[o.i].group
			if tally[g] == nil {
				tally[g] = map[string]int{}
			}
			tally[g]["module "+o.module]++
			tally[g]["library "+o.library]++
		}
		switch {
		case r.done:
			start = len(ms)
		case r.stopped >= 0:
			start = r.stopped
		case r.broken >= 0:
			findings = append(findings, fmt.Sprintf("after mutation %d (%s), or one of the %d before it, a good CUBIN no longer loads: %s",
				r.broken, ms[r.broken].describe(srcs), healthEvery-1, r.why))
			start = r.broken + 1
		case r.begun >= 0 && r.begun != r.ended:
			how := "crashed the process: " + r.why
			if r.hung {
				how = fmt.Sprintf("hung (no progress for %v)", hangAfter)
			}
			next, fld := r.begun+1, ms[r.begun].field(srcs)
			for fld != "" && next < len(ms) && ms[next].group == ms[r.begun].group && ms[next].field(srcs) == fld {
				next++ // the rest of the field: one crash in it is enough to know
			}
			skipped := ""
			if next > r.begun+1 {
				skipped = fmt.Sprintf(" (the field's %d later flips skipped)", next-r.begun-1)
			}
			findings = append(findings, fmt.Sprintf("mutation %d [%s] %s %s%s", r.begun, ms[r.begun].group, ms[r.begun].describe(srcs), how, skipped))
			start = next
		default:
			t.Fatalf("the child failed outside a load: %s\n%s", r.why, r.tail)
		}
	}
	t.Logf("%d damaged images, %d tried in %v by %d processes", len(ms), start, time.Since(began).Round(time.Second), children)
	groups := make([]string, 0, len(tally))
	for g := range tally {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		t.Logf("  %-28s %v", g, tally[g])
	}
	for _, l := range strategyReport(tally) {
		t.Logf("  %s", l)
	}
	if len(findings) > 0 {
		t.Errorf("%d damaged images crashed, hung or broke the process:\n%s", len(findings), strings.Join(findings, "\n"))
	}
	if start < len(ms) {
		t.Errorf("only %d of %d damaged images were tried (the budget, %v, ran out, or %d findings were enough): raise %s",
			start, len(ms), budget, maxCrashes, mutationsBudgetEnv)
	}
}

// childOutcome is what became of mutation i in a child.
type childOutcome struct {
	i               int
	module, library string
}

// childResult is what a child got through.
type childResult struct {
	outcomes        []childOutcome
	begun, ended    int  // the last mutation begun and ended (-1: none)
	done            bool // the child got to the end of the list
	stopped, broken int  // ≥ 0: the child stopped for time before this one, or found the context broken after it
	hung            bool
	why             string // how the child ended, when it did not get to the end
	tail            string // the end of its output
}

// runChild runs a child from mutation start and follows its progress,
// killing it when it makes none for hangAfter.
func runChild(t *testing.T, dir string, start int, deadline time.Time) childResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestImageDamagedNeverCrash$")
	cmd.Env = append(os.Environ(), mutationsEnv+"="+dir, mutationsEnv+"_START="+strconv.Itoa(start),
		mutationsEnv+"_DEADLINE="+strconv.FormatInt(deadline.UnixMilli(), 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	r := childResult{begun: -1, ended: -1, stopped: -1, broken: -1}
	var other []string
	timer := time.NewTimer(hangAfter)
	defer timer.Stop()
	for open := true; open; {
		select {
		case line, ok := <-lines:
			if !ok {
				open = false
				break
			}
			timer.Reset(hangAfter)
			f := strings.Fields(line)
			n := -1
			if len(f) > 1 {
				n, _ = strconv.Atoi(f[1])
			}
			switch {
			case len(f) == 2 && f[0] == "MUTATION-BEGIN":
				r.begun = n
			case len(f) == 4 && f[0] == "MUTATION-END":
				r.ended = n
				r.outcomes = append(r.outcomes, childOutcome{n, f[2], f[3]})
			case len(f) == 1 && f[0] == "MUTATION-DONE":
				r.done = true
			case len(f) == 2 && f[0] == "MUTATION-STOPPED":
				r.stopped = n
			case len(f) >= 2 && f[0] == "MUTATION-BROKEN":
				r.broken, r.why = n, strings.Join(f[2:], " ")
			default:
				other = append(other, line)
			}
		case <-timer.C:
			r.hung = true
			_ = cmd.Process.Kill()
			for range lines { // drain, so that the reader ends
			}
			open = false
		}
	}
	werr := cmd.Wait()
	if r.why == "" {
		r.why = fmt.Sprint(werr)
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(l, "signal ") || strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "SIG") {
				r.why += ": " + strings.TrimSpace(l)
				break
			}
		}
	}
	r.tail = tail([]byte(strings.Join(other, "\n") + "\n" + stderr.String()))
	return r
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// runMutations is the child: it loads every mutation from the start'th on,
// saying before and after each on stdout, so that the parent can tell which
// one a crash or hang interrupted. It stops at the deadline, and every
// healthEvery images checks that a good CUBIN still loads.
func runMutations(t *testing.T, dir string) {
	e, _ := setup(t)
	start, _ := strconv.Atoi(os.Getenv(mutationsEnv + "_START"))
	ms, _ := strconv.ParseInt(os.Getenv(mutationsEnv+"_DEADLINE"), 10, 64)
	deadline := time.UnixMilli(ms)
	srcs := map[string][]byte{}
	for _, name := range append(cubinSources, "fatbin", "ptx", "nvcc-fatbin") {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		srcs[name] = b
	}
	list := mutationsOf(srcs)
	say := func(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }
	for i := start; i < len(list); i++ {
		if time.Now().After(deadline) {
			say("MUTATION-STOPPED %d", i)
			return
		}
		img := list[i].image(srcs)
		say("MUTATION-BEGIN %d", i)
		m := loadModule(e.ctx, img)
		l := loadLibrary(img)
		say("MUTATION-END %d %s %s", i, m, l)
		if (i-start+1)%healthEvery == 0 || i == len(list)-1 {
			if got := loadModule(e.ctx, srcs["cubin"]); got != "loaded" {
				say("MUTATION-BROKEN %d %s", i, got)
				return
			}
		}
	}
	say("MUTATION-DONE")
}

// outcome names what became of a load, in one word.
func outcome(err error) string {
	var ce *driver.Error
	switch {
	case err == nil:
		return "loaded"
	case errors.Is(err, driver.ErrInvalidImage) && !errors.As(err, new(*driver.ModuleError)):
		return "refused-by-check"
	case errors.As(err, &ce):
		return ce.Code.String()
	default:
		return "refused-by-cuda"
	}
}

// loadModule loads img, looks up a kernel and unloads it.
func loadModule(ctx *driver.Context, img []byte) string {
	mod, err := ctx.LoadModule(img)
	if err != nil {
		return outcome(err)
	}
	_, _ = mod.Function("scaled")
	if err := mod.Close(); err != nil {
		return "close-failed:" + outcome(err)
	}
	return outcome(nil)
}

// loadLibrary loads img as a library, looks up a kernel and unloads it.
func loadLibrary(img []byte) string {
	lib, err := driver.LoadLibrary(img)
	if err != nil {
		return outcome(err)
	}
	_, _ = lib.Function("scaled")
	if err := lib.Close(); err != nil {
		return "close-failed:" + outcome(err)
	}
	return outcome(nil)
}
