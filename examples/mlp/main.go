// Command mlp runs the forward pass of a small multilayer perceptron on the
// GPU, batch 64, 1024 → 1024 → 1024 → 10, in float32: each layer is
// y = x·W + b, followed by ReLU on all but the last, with W row-major as a
// Go program holds it. The product is a cuBLAS Gemm on row-major views (no
// copy, no transpose by hand); bias and ReLU are one kernel compiled at run
// time by NVRTC. The pass runs as plain stream calls and as one CUDA graph
// captured from the same calls and replayed; both outputs are checked
// against a CPU reference, and the median time of a step (queue the pass,
// wait for it) is printed for each. It uses only purecuda's public API.
//
//	go run github.com/purecuda/cuda/examples/mlp@latest
//
// Exit status: 0 when both outputs match the reference, 1 when a step
// fails or an output is wrong, 2 when there is no usable GPU or no cuBLAS
// (cmd/smoke says what to install).
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/purecuda/cuda/cublas"
	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/nvrtc"
)

// biasAct adds bias[j] to every element (i, j) of the row-major
// rows×cols y and, with relu, replaces negative sums with 0.
const source = `
extern "C" __global__ void bias_act(float *y, const float *bias, unsigned rows, unsigned cols, int relu)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float v = y[i] + bias[i % cols];
        y[i] = relu && v < 0.0f ? 0.0f : v;
    }
}
`

// The network: batch rows, and the width of each layer's input and
// output.
const batch = 64

var widths = []int{1024, 1024, 1024, 10}

// steps is how many steps each way is timed.
const steps = 200

// tolerance is the largest |got − want| / max(1, |want|) accepted: the
// GPU sums 1024 float32 products in an order of its own (and may use
// TF32 tensor cores when NVIDIA_TF32_OVERRIDE asks), the reference sums
// in float64.
const tolerance = 1e-3

func main() {
	dev, err := firstDevice()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mlp: no usable GPU: %v\n", err)
		fmt.Fprintln(os.Stderr, "Run `go run github.com/purecuda/cuda/cmd/smoke@latest` to see where purecuda looked and what to install.")
		os.Exit(2)
	}
	if _, _, _, _, err := cublas.Version(); err != nil {
		fmt.Fprintf(os.Stderr, "mlp: no usable cuBLAS: %v\n", err)
		os.Exit(2)
	}
	if err := run(os.Stdout, dev); err != nil {
		fmt.Fprintf(os.Stderr, "mlp: %v\n", err)
		os.Exit(1)
	}
}

// firstDevice returns device 0, or an error when this machine has no CUDA
// driver or no device.
func firstDevice() (*driver.Device, error) {
	count, err := driver.DeviceCount() // loads the driver and calls cuInit
	if err != nil {
		if errors.Is(err, driver.ErrNoGPU) {
			return nil, err
		}
		return nil, fmt.Errorf("the CUDA driver did not start: %w", err)
	}
	if count == 0 {
		return nil, errors.New("the CUDA driver reports no device")
	}
	return driver.DeviceByOrdinal(0)
}

// closing joins c.Close's error to *err: deferred right after c is made,
// so that run returns the first error and every Close's error with it.
func closing(err *error, c io.Closer) { *err = errors.Join(*err, c.Close()) }

// layer is one layer's parameters, on the host and on the device.
type layer struct {
	in, out int
	w, b    []float32 // w: in×out, row-major; b: out
	dw, db  *driver.Buffer[float32]
}

// newLayers makes the layers' weights and biases, uniform in ±1/√in.
func newLayers(r *rand.Rand) []layer {
	ls := make([]layer, len(widths)-1)
	for i := range ls {
		in, out := widths[i], widths[i+1]
		scale := 1 / math.Sqrt(float64(in))
		ls[i] = layer{in: in, out: out, w: uniform(r, in*out, scale), b: uniform(r, out, scale)}
	}
	return ls
}

// uniform is n values uniform in [−scale, scale).
func uniform(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((2*r.Float64() - 1) * scale)
	}
	return v
}

// forward is the CPU reference: the network on the batch×widths[0]
// row-major x, in float64 sums of the float32 values.
func forward(ls []layer, x []float32) []float32 {
	for li, l := range ls {
		rows := len(x) / l.in
		y := make([]float32, rows*l.out)
		for i := range rows {
			for j := range l.out {
				s := float64(l.b[j])
				for k := range l.in {
					s += float64(x[i*l.in+k]) * float64(l.w[k*l.out+j])
				}
				if li < len(ls)-1 && s < 0 {
					s = 0
				}
				y[i*l.out+j] = float32(s)
			}
		}
		x = y
	}
	return x
}

// compare returns the largest relative difference of got from want, or
// an error naming the first element beyond tolerance.
func compare(want, got []float32) (float64, error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("%d outputs, want %d", len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		d := math.Abs(float64(got[i])-float64(want[i])) / math.Max(1, math.Abs(float64(want[i])))
		if !(d <= tolerance) { // NaN fails too
			return d, fmt.Errorf("output %d (row %d, column %d) is %v, want %v", i, i/widths[len(widths)-1], i%widths[len(widths)-1], got[i], want[i])
		}
		worst = math.Max(worst, d)
	}
	return worst, nil
}

// median is the median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func run(w io.Writer, dev *driver.Device) (err error) {
	name, err := dev.Name()
	if err != nil {
		return err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return err
	}
	defer closing(&err, ctx)
	mod, _, err := ctx.CompileModule(source, nvrtc.Options{Name: "bias_act.cu"})
	if err != nil {
		return err
	}
	defer closing(&err, mod)
	biasAct, err := mod.Function("bias_act")
	if err != nil {
		return err
	}
	s, err := ctx.NewStream(driver.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer closing(&err, s)
	// The handle queues every Gemm on s, in order with the kernels.
	h, err := cublas.NewHandle(s, nil)
	if err != nil {
		return err
	}
	defer closing(&err, h)

	r := rand.New(rand.NewPCG(1, 2))
	ls := newLayers(r)
	x := uniform(r, batch*widths[0], 1)
	for i := range ls {
		if ls[i].dw, err = driver.AllocCopy(s, ls[i].w); err != nil {
			return err
		}
		defer closing(&err, ls[i].dw)
		if ls[i].db, err = driver.AllocCopy(s, ls[i].b); err != nil {
			return err
		}
		defer closing(&err, ls[i].db)
	}
	// acts[0] is the input, acts[i+1] layer i's output.
	acts := make([]*driver.Buffer[float32], len(widths))
	if acts[0], err = driver.AllocCopy(s, x); err != nil {
		return err
	}
	defer closing(&err, acts[0])
	for i := 1; i < len(acts); i++ {
		if acts[i], err = driver.Alloc[float32](ctx, batch*widths[i]); err != nil {
			return err
		}
		defer closing(&err, acts[i])
	}

	// step queues the forward pass on s: per layer, out = in·W (row-major
	// views of the buffers as they are), then bias and ReLU in place.
	step := func(s *driver.Stream) error {
		for i, l := range ls {
			in := cublas.RowMajorMatrix(acts[i], batch, l.in)
			wm := cublas.RowMajorMatrix(l.dw, l.in, l.out)
			out := cublas.RowMajorMatrix(acts[i+1], batch, l.out)
			if err := cublas.Gemm(h, 1, in, wm, 0, out); err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
			n := batch * l.out
			relu := int32(0)
			if i < len(ls)-1 {
				relu = 1
			}
			if err := s.Launch(biasAct, driver.Grid((n+255)/256), driver.Block(256), acts[i+1], l.db, uint32(batch), uint32(l.out), relu); err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
		}
		return nil
	}
	want := forward(ls, x)
	last := acts[len(acts)-1]
	check := func(how string) (float64, error) {
		got, err := last.ToHost(s)
		if err != nil {
			return 0, err
		}
		worst, err := compare(want, got)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", how, err)
		}
		// Clear the output, so that the next check sees the next pass's.
		return worst, last.MemsetFloat32(s, float32(math.NaN()))
	}

	if err := step(s); err != nil {
		return err
	}
	worstStream, err := check("stream calls")
	if err != nil {
		return err
	}
	g, err := graph.Capture(s, graph.CaptureRelaxed, step)
	if err != nil {
		return err
	}
	exe, err := g.Instantiate()
	if err != nil {
		return errors.Join(err, g.Close())
	}
	defer closing(&err, exe)
	if err := g.Close(); err != nil { // the executable keeps what it needs
		return err
	}
	if err := exe.Launch(s); err != nil {
		return err
	}
	worstGraph, err := check("graph")
	if err != nil {
		return err
	}

	streamTimes, err := timeSteps(s, func() error { return step(s) })
	if err != nil {
		return err
	}
	graphTimes, err := timeSteps(s, func() error { return exe.Launch(s) })
	if err != nil {
		return err
	}
	if _, err := check("after timing"); err != nil {
		return err
	}
	shape := make([]string, len(widths))
	for i, n := range widths {
		shape[i] = strconv.Itoa(n)
	}
	fmt.Fprintf(w, "mlp: %d layers (%s), batch %d, float32, on %s (%s)\n", len(ls), strings.Join(shape, "→"), batch, name, dev.Arch())
	fmt.Fprintf(w, "mlp: output matches the CPU reference: stream calls within %.1e, graph within %.1e (tolerance %.0e)\n", worstStream, worstGraph, tolerance)
	ms, mg := median(streamTimes), median(graphTimes)
	fmt.Fprintf(w, "mlp: step (queue the pass, wait for it), median of %d: stream calls %.1f µs, graph %.1f µs (%.2fx)\n",
		steps, float64(ms.Nanoseconds())/1e3, float64(mg.Nanoseconds())/1e3, float64(ms)/float64(mg))
	return nil
}

// timeSteps runs f and waits for s, 10 times untimed and then steps
// times, and returns each timed step's duration.
func timeSteps(s *driver.Stream, f func() error) ([]time.Duration, error) {
	ds := make([]time.Duration, 0, steps)
	for i := range steps + 10 {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		if err := s.Synchronize(); err != nil {
			return nil, err
		}
		if i >= 10 {
			ds = append(ds, time.Since(start))
		}
	}
	return ds, nil
}
