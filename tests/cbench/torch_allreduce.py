"""PyTorch's all-reduce, for comparison with package nccl's benchmarks.

One process per GPU (torch.multiprocessing), NCCL backend, float32 in
place, as BenchmarkAllReduce measures it: time per all-reduce at 8 bytes and
1 GiB, and bus bandwidth as nccl-tests computes it (2(k-1)/k x bytes / time).
Run by .gpu/run.sh's bench section: python3 torch_allreduce.py [reps]
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, reps, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    for nbytes, iters in ((8, 5000), (1 << 30, 20)):
        x = torch.zeros(nbytes // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        for _ in range(reps):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            torch.cuda.synchronize()
            per = (time.perf_counter() - t0) / iters
            if rank == 0:
                bus = 2 * (world - 1) / world * nbytes / per / 1e9
                print(f"PyTorch AllReduce/bytes={nbytes:<10} {per * 1e6:10.2f} us/op {bus:8.2f} busGB/s", flush=True)
        del x
    dist.destroy_process_group()


if __name__ == "__main__":
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    world = torch.cuda.device_count()
    if world < 1:
        sys.exit("no GPU")
    print(f"PyTorch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {world} GPUs", flush=True)
    mp.spawn(worker, args=(world, reps, 29511), nprocs=world, join=True)
