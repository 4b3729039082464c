package driver

import (
	"github.com/purecuda/cuda/nvrtc"
)

// CompileModule compiles CUDA C++ with NVRTC and loads the result into c.
// An empty opts.Arch targets c's device (its sm_XX, so a CUBIN is loaded).
// The nvrtc.Output carries the log and the lowered names of
// opts.NameExpressions, for Module.Function.
func (c *Context) CompileModule(source string, opts nvrtc.Options) (*Module, *nvrtc.Output, error) {
	if err := c.hold("Context.CompileModule"); err != nil {
		return nil, nil, err
	}
	defer c.release()
	if opts.Arch == "" {
		opts.Arch = c.dev.Arch()
	}
	res, err := nvrtc.Compile(source, opts)
	if err != nil {
		return nil, nil, err
	}
	m, err := c.LoadModule(res.Image())
	if err != nil {
		return nil, res, err
	}
	return m, res, nil
}
