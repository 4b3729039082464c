/* tail_overread.c: does NCCL itself read past the end of an 8-bit buffer
   whose size is no multiple of 4? An in-process all-reduce over every GPU
   (ncclCommInitAll) of N int8 elements, N = 2^20 + 3 (as the nccl
   package's TestAllReduceEveryTypeOnGPUs), buffers from cuMemAlloc of
   exactly N bytes. Run it under compute-sanitizer --tool memcheck: seen
   with NCCL 2.28.3 on 2 H200s, ncclDevKernel_AllReduce_Sum_u8_RING_LL reads
   4 bytes at offset 2^20, one byte past the end (no purecuda involved).

     gcc -O2 -I/usr/local/cuda/include tail_overread.c -o tail_overread \
         -L/usr/local/nvidia/lib64 -lcuda -ldl
     NCCL_NVLS_ENABLE=0 compute-sanitizer --tool memcheck ./tail_overread [N]
*/
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*initall_t)(void **, int, const int *);
typedef int (*allreduce_t)(const void *, void *, size_t, int, int, void *, CUstream);
typedef int (*group_t)(void);
typedef int (*destroy_t)(void *);

#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s: %d\n", #x, r_); return 1; } } while (0)
#define NK(x) do { int r_ = (x); if (r_) { fprintf(stderr, "%s: nccl %d\n", #x, r_); return 1; } } while (0)

int main(int argc, char **argv) {
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : (1u << 20) + 3;
	void *h = dlopen("libnccl.so.2", RTLD_NOW);
	if (!h) { fprintf(stderr, "no libnccl.so.2\n"); return 2; }
	initall_t initall = (initall_t)dlsym(h, "ncclCommInitAll");
	allreduce_t ar = (allreduce_t)dlsym(h, "ncclAllReduce");
	group_t gs = (group_t)dlsym(h, "ncclGroupStart"), ge = (group_t)dlsym(h, "ncclGroupEnd");
	destroy_t destroy = (destroy_t)dlsym(h, "ncclCommDestroy");
	CK(cuInit(0));
	int nd;
	CK(cuDeviceGetCount(&nd));
	if (nd > 8) nd = 8;
	CUcontext ctx[8];
	CUstream st[8];
	CUdeviceptr s[8], r[8];
	int devs[8];
	void *comm[8];
	for (int d = 0; d < nd; d++) {
		CUdevice dev;
		CK(cuDeviceGet(&dev, d));
		CK(cuDevicePrimaryCtxRetain(&ctx[d], dev));
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuStreamCreate(&st[d], CU_STREAM_NON_BLOCKING));
		CK(cuMemAlloc(&s[d], n));
		CK(cuMemAlloc(&r[d], n));
		CK(cuMemsetD8(s[d], 1, n));
		CK(cuMemsetD8(r[d], 0, n));
		devs[d] = d;
	}
	NK(initall(comm, nd, devs));
	NK(gs());
	for (int d = 0; d < nd; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		NK(ar((void *)s[d], (void *)r[d], n, 0 /* ncclInt8 */, 0 /* ncclSum */, comm[d], st[d]));
	}
	NK(ge());
	for (int d = 0; d < nd; d++) {
		CK(cuCtxSetCurrent(ctx[d]));
		CK(cuStreamSynchronize(st[d]));
	}
	unsigned char last;
	CK(cuMemcpyDtoH(&last, r[0] + n - 1, 1));
	printf("%d GPUs, %zu int8 elements: last element %d (want %d)\n", nd, n, last, nd);
	for (int d = 0; d < nd; d++) destroy(comm[d]);
	return last == nd ? 0 : 1;
}
