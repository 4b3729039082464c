package stress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/cuda/driver"
	"github.com/purecuda/cuda/graph"
	"github.com/purecuda/cuda/lifetime"
)

// launchOnce instantiates g, launches it on s and closes the executable.
func launchOnce(g *graph.Graph, s *driver.Stream) error {
	e, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer e.Close()
	return e.Launch(s)
}

// GraphExempt are exported names of package graph that the stress does not
// call, with the reason.
var GraphExempt = map[string]string{
	"Graph.Close": "the round's closers race it", "Exec.Close": "the round's closers race it",
	"Kind.String": "a name", "CaptureMode.String": "a name", "CaptureStatus.String": "a name",
	"InstantiateResult.String": "a name", "UpdateResult.String": "a name",
	"InstantiateError.Error": "an error's text", "InstantiateError.Unwrap": "an error's cause",
	"UpdateError.Error": "an error's text", "UpdateError.Unwrap": "an error's cause",
}

// GraphMethods lists the exported methods of package graph's types.
func GraphMethods() []string {
	var all []string
	for _, v := range []any{(*graph.Graph)(nil), graph.Builder{}, graph.Node{}, (*graph.Exec)(nil), (*graph.StreamCapture)(nil),
		graph.Condition{}, graph.Kind(0), graph.CaptureMode(0), graph.CaptureStatus(0), graph.InstantiateResult(0),
		graph.UpdateResult(0), (*graph.InstantiateError)(nil), (*graph.UpdateError)(nil)} {
		t := reflect.TypeOf(v)
		name := t.Name()
		if t.Kind() == reflect.Pointer {
			name = t.Elem().Name()
		}
		for i := 0; i < t.NumMethod(); i++ {
			all = append(all, name+"."+t.Method(i).Name)
		}
	}
	return all
}

// GraphResult is what a stress run saw.
type GraphResult struct {
	Rounds, Calls, Closed int64
	Unexpected            map[string]error // by operation: the first unexpected error
}

// RunGraph runs the stress for total with goroutines goroutines in ctx,
// with fill its fill kernel; cond says whether the driver has conditional
// nodes. It returns after every round's objects are closed.
func RunGraph(ctx *driver.Context, fill *driver.Function, cond bool, total time.Duration, goroutines int) (GraphResult, error) {
	ops := GraphOps()
	// PURECUDA_STRESS_SKIP (a regexp on an op's Covers) leaves ops out, to
	// narrow down a failure.
	if skip := os.Getenv("PURECUDA_STRESS_SKIP"); skip != "" {
		re, err := regexp.Compile(skip)
		if err != nil {
			return GraphResult{}, err
		}
		kept := ops[:0]
		for _, o := range ops {
			if !re.MatchString(strings.Join(o.Covers, ",")) {
				kept = append(kept, o)
			}
		}
		ops = kept
	}
	res := GraphResult{Unexpected: map[string]error{}}
	var mu sync.Mutex
	unexpected := func(what string, err error) {
		mu.Lock()
		if _, ok := res.Unexpected[what]; !ok {
			res.Unexpected[what] = err
		}
		mu.Unlock()
	}
	roundLen := 100 * time.Millisecond
	if total < time.Second {
		roundLen = total / 10
	}
	var hostCalls, calls, closed atomic.Int64
	end := time.Now().Add(total)
	for time.Now().Before(end) {
		w, err := NewGraphWorld(ctx, fill, cond, &hostCalls)
		if err != nil {
			return res, err
		}
		start := time.Now()
		var wg sync.WaitGroup
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(res.Rounds), uint64(g)))
				for {
					el := time.Since(start)
					if el > roundLen {
						return
					}
					if r.Float64() < 0.01*float64(el)/float64(roundLen) {
						i := r.IntN(len(w.Closers))
						if err := w.Closers[i](); err != nil && !errors.Is(err, driver.ErrClosed) && !allowBusy(err) {
							unexpected(w.CloserNames[i], err)
						}
						continue
					}
					i := r.IntN(len(ops))
					err := call(ops[i], w, r)
					calls.Add(1)
					switch {
					case err == nil:
					case errors.Is(err, driver.ErrClosed):
						closed.Add(1)
					case ops[i].Allow != nil && ops[i].Allow(err):
					case !cond && errors.Is(err, driver.ErrNotSupported):
					default:
						unexpected(strings.Join(ops[i].Covers, ","), err)
					}
				}
			}()
		}
		wg.Wait()
		if err := w.CloseAll(); err != nil && !allowBusy(err) {
			unexpected("CloseAll", err)
		}
		res.Rounds++
	}
	res.Calls, res.Closed = calls.Load(), closed.Load()
	lifetime.Flush()
	return res, nil
}

// call runs op, turning a panic into an error.
func call(op GraphOp, w *GraphWorld, r *rand.Rand) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return op.Do(w, r)
}
