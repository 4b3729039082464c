package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/loader"
)

// Report is everything smoke found; -json prints it as it is, and the text
// output is made from the same values.
type Report struct {
	Result   string       `json:"result"`           // "PASS" or "FAIL"
	ExitCode int          `json:"exit_code"`        // 0, 1 or 2; see the package doc
	Reason   string       `json:"reason,omitempty"` // why it is not PASS, one line
	Passed   int          `json:"passed"`
	Failed   int          `json:"failed"`
	Skipped  int          `json:"skipped"`
	Seconds  float64      `json:"seconds"`
	Platform string       `json:"platform"` // GOOS/GOARCH
	Go       string       `json:"go"`       // the Go release that built smoke
	Driver   Library      `json:"driver"`
	NVRTC    Library      `json:"nvrtc"`
	Devices  []Device     `json:"devices"`
	Device   int          `json:"device"` // the -device used by compile and launch
	Steps    []StepReport `json:"steps"`
	Advice   []string     `json:"advice,omitempty"` // what to install or change
}

// Library is what was found of one shared library.
type Library struct {
	Found       bool      `json:"found"`
	Path        string    `json:"path,omitempty"`         // as opened: a full path or a name the system's loader resolved
	File        string    `json:"file,omitempty"`         // the file the process mapped, where the OS says (Linux)
	Version     string    `json:"version,omitempty"`      // "13.0"
	VersionCode int       `json:"version_code,omitempty"` // the driver's CUDA version as CUDA writes it, 13000; 0 for NVRTC
	Release     string    `json:"release,omitempty"`      // the NVIDIA driver's release, 580.159.04, where File's name gives it
	EnvVar      string    `json:"env_var"`                // the full-path override
	Override    string    `json:"override,omitempty"`     // its value, when set
	Searched    []Attempt `json:"searched,omitempty"`     // when not found: every candidate and why it failed
	Error       string    `json:"error,omitempty"`
}

// Attempt is one place searched.
type Attempt struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Device is one CUDA device.
type Device struct {
	Ordinal     int    `json:"ordinal"`
	Name        string `json:"name"`
	Arch        string `json:"arch"` // "sm_90"
	MemoryBytes int64  `json:"memory_bytes"`
	SMs         int    `json:"sms"`
}

// StepReport is one step's outcome.
type StepReport struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"` // "pass", "fail" or "skip"
	Seconds float64  `json:"seconds"`
	Summary string   `json:"summary,omitempty"`
	Error   string   `json:"error,omitempty"`
	NoGPU   string   `json:"no_gpu,omitempty"` // set when the failure means there is no usable GPU (exit 2): why, in short
	Details []string `json:"details,omitempty"`
}

const (
	statusPass = "pass"
	statusFail = "fail"
	statusSkip = "skip"
)

// step is one check. needs names earlier steps that must have passed;
// otherwise the step is skipped. run returns a one-line summary, or an error
// (wrapped by noGPU when it means there is no usable GPU here).
type step struct {
	name  string
	needs []string
	run   func(*state) (string, error)
}

// noGPUError marks a failure that means this machine has no usable GPU:
// smoke then exits 2 rather than 1. why is the short form for the last line.
type noGPUError struct {
	why string
	err error
}

func (e *noGPUError) Error() string { return e.err.Error() }
func (e *noGPUError) Unwrap() error { return e.err }

func noGPU(why string, err error) error { return &noGPUError{why, err} }

// skipError is what a step returns when this machine cannot take it (a
// second GPU, NCCL): the step is reported skipped with why, not failed.
type skipError struct{ why string }

func (e *skipError) Error() string { return "skipped: " + e.why }

func skipped(format string, args ...any) error { return &skipError{fmt.Sprintf(format, args...)} }

// runSteps runs list in order, writing each step's line as it finishes.
func runSteps(cfg config, list []step, tw *textWriter) *Report {
	rep := &Report{
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Go:       runtime.Version(),
		Devices:  []Device{},
		Device:   cfg.device,
		Driver:   Library{EnvVar: loader.KindDriver.EnvVar()},
		NVRTC:    Library{EnvVar: loader.KindNVRTC.EnvVar()},
	}
	st := &state{cfg: cfg, rep: rep}
	tw.header(rep)
	start := time.Now()
	status := map[string]string{}
	faulted := "" // the step whose GPU fault ended CUDA for this process
	for _, sp := range list {
		sr := StepReport{Name: sp.name}
		var missing []string
		for _, n := range sp.needs {
			if status[n] != statusPass {
				missing = append(missing, n)
			}
		}
		switch {
		case faulted != "":
			sr.Status = statusSkip
			sr.Summary = "the GPU fault in step " + faulted + " ended CUDA for this process"
		case len(missing) > 0:
			sr.Status = statusSkip
			sr.Summary = "needs " + strings.Join(missing, " and ")
		default:
			st.cur = &sr
			t0 := time.Now()
			summary, err := st.call(sp)
			sr.Seconds = time.Since(t0).Seconds()
			st.cur = nil
			var skip *skipError
			switch {
			case errors.As(err, &skip):
				sr.Status = statusSkip
				sr.Summary = skip.why
			case err != nil:
				sr.Status = statusFail
				sr.Error = err.Error()
				var ng *noGPUError
				if errors.As(err, &ng) {
					sr.NoGPU = ng.why
				}
				if errors.Is(err, driver.ErrSticky) {
					faulted = sp.name
					sr.Error = stickyText + ": " + sr.Error
					st.advise("run smoke again: a GPU fault ends CUDA for the process that hit it, not for the next one; " +
						"if it happens again, look for Xid errors in the kernel log (dmesg) and check the GPU with nvidia-smi")
				}
			default:
				sr.Status = statusPass
				sr.Summary = summary
			}
		}
		status[sp.name] = sr.Status
		rep.Steps = append(rep.Steps, sr)
		tw.step(&rep.Steps[len(rep.Steps)-1])
	}
	if err := st.close(); err != nil {
		sr := StepReport{Name: "cleanup", Status: statusFail, Error: err.Error()}
		if faulted != "" {
			// CUDA fails the closes too after a fault: not a second failure.
			sr = StepReport{Name: "cleanup", Status: statusSkip, Summary: "not judged after the GPU fault in step " + faulted,
				Details: []string{err.Error()}}
		}
		rep.Steps = append(rep.Steps, sr)
		tw.step(&rep.Steps[len(rep.Steps)-1])
	}
	rep.Seconds = time.Since(start).Seconds()
	finish(rep)
	tw.footer(rep)
	return rep
}

// stickyText begins the error of a step that failed with an unrecoverable
// GPU fault (driver.ErrSticky).
const stickyText = "the GPU hit an unrecoverable fault; the process must exit to use CUDA again"

// finish counts the steps and decides the result and the exit status: any
// no-GPU failure gives 2 (nothing else can be judged on such a machine), any
// other failure 1.
func finish(rep *Report) {
	var firstFail, firstNoGPU *StepReport
	for i := range rep.Steps {
		s := &rep.Steps[i]
		switch s.Status {
		case statusPass:
			rep.Passed++
		case statusSkip:
			rep.Skipped++
		case statusFail:
			rep.Failed++
			if firstFail == nil {
				firstFail = s
			}
			if s.NoGPU != "" && firstNoGPU == nil {
				firstNoGPU = s
			}
		}
	}
	switch {
	case firstNoGPU != nil:
		rep.Result, rep.ExitCode = "FAIL", exitNoGPU
		rep.Reason = "no usable GPU: " + firstNoGPU.NoGPU
	case firstFail != nil:
		rep.Result, rep.ExitCode = "FAIL", exitFail
		rep.Reason = "step " + firstFail.Name + " failed: " + firstLine(firstFail.Error)
	case rep.Passed == 0:
		rep.Result, rep.ExitCode = "FAIL", exitFail
		rep.Reason = "no step ran"
	default:
		rep.Result, rep.ExitCode = "PASS", exitPass
	}
}

// state is what steps share: the report, and the objects one step makes for
// the next.
type state struct {
	cfg     config
	rep     *Report
	cur     *StepReport
	closers []func() error // run in reverse order by close
	gpu                    // what the steps have made so far
}

// note adds a line of detail to the current step, shown always.
func (s *state) note(format string, args ...any) {
	if s.cur != nil {
		s.cur.Details = append(s.cur.Details, fmt.Sprintf(format, args...))
	}
}

// detail adds a line shown only with -v.
func (s *state) detail(format string, args ...any) {
	if s.cfg.verbose {
		s.note(format, args...)
	}
}

// advise adds a line to what the user should install or change.
func (s *state) advise(format string, args ...any) {
	s.rep.Advice = append(s.rep.Advice, fmt.Sprintf(format, args...))
}

// deferClose registers a Close to run, newest first, after the last step.
func (s *state) deferClose(f func() error) { s.closers = append(s.closers, f) }

func (s *state) close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// call runs one step; a panic is a failure of that step, not of smoke.
func (s *state) call(sp step) (summary string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
			s.detail("%s", debug.Stack())
		}
	}()
	return sp.run(s)
}

// textWriter prints the human-readable report as the steps finish.
type textWriter struct {
	w       io.Writer
	verbose bool
}

// indent lines up detail lines under a step's summary.
const indent = "                            "

func (t *textWriter) header(rep *Report) {
	fmt.Fprintf(t.w, "purecuda smoke  %s  %s\n", rep.Platform, rep.Go)
}

func (t *textWriter) step(s *StepReport) {
	label, text := "ok", s.Summary
	dur := formatDuration(time.Duration(s.Seconds * float64(time.Second)))
	switch s.Status {
	case statusFail:
		label, text = "FAIL", s.Error
	case statusSkip:
		label, dur = "skip", ""
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	fmt.Fprintf(t.w, "  %-4s  %-8s %9s  %s\n", label, s.Name, dur, lines[0])
	for _, l := range append(lines[1:], s.Details...) {
		for _, ll := range strings.Split(strings.TrimRight(l, "\n"), "\n") {
			fmt.Fprintf(t.w, "%s%s\n", indent, strings.TrimLeft(ll, "\t"))
		}
	}
}

func (t *textWriter) footer(rep *Report) {
	if len(rep.Advice) > 0 {
		fmt.Fprintln(t.w, "What to do:")
		for _, a := range rep.Advice {
			fmt.Fprintf(t.w, "  - %s\n", a)
		}
	}
	counts := fmt.Sprintf("%d passed", rep.Passed)
	if rep.Failed > 0 || rep.Skipped > 0 {
		counts += fmt.Sprintf(", %d failed, %d skipped", rep.Failed, rep.Skipped)
	}
	line := fmt.Sprintf("%s  %s in %s", rep.Result, counts, formatDuration(time.Duration(rep.Seconds*float64(time.Second))))
	if rep.Reason != "" {
		line += fmt.Sprintf(" — %s (exit %d)", rep.Reason, rep.ExitCode)
	}
	fmt.Fprintln(t.w, line)
}

func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

func formatDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", ms)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSuffix(s[:i], "; tried:")
		return strings.TrimRight(s, " :;")
	}
	return s
}

// formatBytes prints a size in GiB, MiB or KiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
}
