"""PyTorch's matrix products, for comparison with package cublas's benchmarks.

On GPU 0, as BenchmarkGemmVersusC measures them: a 64x64x64 float32 product
(torch.matmul into a preallocated result) per call, queued back to back then
waited for; the same 100 products captured into a CUDA graph and replayed,
per product; and 8192^3 float32 and bfloat16 products (float32 accumulate)
in TFLOPS. TF32 is off, as cuBLAS's SGEMM computes in float32.
Run by .gpu/run.sh's bench section: python3 torch_matmul.py [reps]
"""
import sys
import time

import torch


def timed(f, iters):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda", 0)
    print(f"PyTorch {torch.__version__}, {torch.cuda.get_device_name(dev)}", flush=True)

    a, b, c = (torch.randn(64, 64, device=dev) for _ in range(3))
    small = lambda: torch.matmul(a, b, out=c)
    for _ in range(100):
        small()
    for _ in range(reps):
        print(f"PyTorch matmul 64^3 float32      {timed(small, 20000) * 1e6:10.2f} us/call", flush=True)

    xs = [torch.randn(64, 64, device=dev) for _ in range(100)]
    ys = [torch.randn(64, 64, device=dev) for _ in range(100)]
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for x, y in zip(xs, ys):  # warm up on the capture stream
            torch.matmul(x, y, out=c)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for x, y in zip(xs, ys):
            torch.matmul(x, y, out=c)
    for _ in range(reps):
        print(f"PyTorch graph of 100 matmuls    {timed(g.replay, 200) * 1e6 / 100:10.2f} us/matmul", flush=True)

    n = 8192
    for dtype in (torch.float32, torch.bfloat16):
        x, y = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
        z = torch.empty(n, n, device=dev, dtype=dtype)
        big = lambda: torch.matmul(x, y, out=z)
        big()
        for _ in range(reps):
            per = timed(big, 10 if dtype == torch.float32 else 50)
            print(f"PyTorch matmul 8192^3 {str(dtype):15} {2 * n**3 / per / 1e12:10.1f} TFLOPS", flush=True)
        del x, y, z


if __name__ == "__main__":
    main()
