// capture_invalidation_race.c: on driver 580 (H100), a graph launch into a
// stream capture (which CUDA refuses, invalidating the capture) racing an
// event record and wait on the capture's streams in another thread kills
// the process inside libcuda (variant 1: 3 of 3 runs); a captured memset in
// its place (variant 2) never does. This is why package graph refuses
// Exec.Launch/Upload and driver refuses Stream.Synchronize/Query on a stream
// it captures (../shared/DESIGN.md, fact 17). Build and run on a GPU machine:
//
//   gcc -O1 -I/usr/local/cuda/include capture_invalidation_race.c -o race \
//       -L/usr/local/nvidia/lib64 -lcuda -lpthread && ./race
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
static CUcontext ctx; static CUdeviceptr buf; static CUgraphExec x;
static CUstream s2, s3; static CUevent ev; static pthread_barrier_t bar; static int variant;
static void *A(void *p) {
  cuCtxSetCurrent(ctx); pthread_barrier_wait(&bar);
  for (int k = 0; k < 4; k++) {
    if (variant == 1) cuGraphLaunch(x, s2); else cuMemsetD32Async(buf, 3, 64, s2);
  }
  return 0;
}
static void *B(void *p) {
  cuCtxSetCurrent(ctx); pthread_barrier_wait(&bar);
  for (int k = 0; k < 8; k++) { cuEventRecord(ev, s3); cuStreamWaitEvent(s2, ev, 0); cuMemsetD32Async(buf, 1, 64, s3); }
  return 0;
}
static void run(int rounds) {
  CUgraph g0; CUgraphNode n;
  cuGraphCreate(&g0, 0); cuGraphAddEmptyNode(&n, g0, NULL, 0); cuGraphInstantiate(&x, g0, 0);
  int ok = 0, bad = 0;
  for (int i = 0; i < rounds; i++) {
    CUgraph g = 0;
    cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING); cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING);
    cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED);
    cuEventRecord(ev, s2); cuStreamWaitEvent(s3, ev, 0);
    pthread_barrier_init(&bar, 0, 2);
    pthread_t a, b; pthread_create(&a, 0, A, 0); pthread_create(&b, 0, B, 0);
    pthread_join(a, 0); pthread_join(b, 0); pthread_barrier_destroy(&bar);
    cuEventRecord(ev, s3); cuStreamWaitEvent(s2, ev, 0);
    if (cuStreamEndCapture(s2, &g) == 0) ok++; else bad++;
    if (g) cuGraphDestroy(g);
    cuStreamSynchronize(s3); cuStreamSynchronize(s2);
    cuEventDestroy(ev); cuStreamDestroy(s2); cuStreamDestroy(s3);
  }
  printf(" variant %d: %d rounds done, %d ended well, %d failed\n", variant, rounds, ok, bad);
}
int main(void) {
  for (variant = 1; variant <= 2; variant++) {
    for (int rep = 0; rep < 3; rep++) {
      fflush(stdout);
      pid_t p = fork();
      if (p == 0) { CUdevice d; cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&ctx, d); cuCtxSetCurrent(ctx); cuMemAlloc(&buf, 256); run(3000); fflush(stdout); _exit(0); }
      int st; waitpid(p, &st, 0);
      if (WIFSIGNALED(st)) printf(" variant %d rep %d: KILLED by signal %d\n", variant, rep, WTERMSIG(st));
    }
  }
  return 0;
}
