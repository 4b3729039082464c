// capture_global_calls.c: which event and stream calls, made on a thread
// whose capture mode is global, does a capture in global mode on another
// thread of the same context refuse, and is it invalidated by them? Each
// call runs in a capture of its own (thread A captures s1; thread B makes
// the call, on s2, uncaptured, or the legacy stream); the table prints the
// call's result and cuStreamEndCapture's. Then the same with B's mode
// relaxed. purecuda's frees wait for the context's work through events
// (driver/drain.go): this says which of their calls need relaxed mode.
// Build and run on a GPU machine:
//
//   gcc -O1 -I/usr/local/cuda/include capture_global_calls.c -o calls \
//       -L/usr/local/nvidia/lib64 -lcuda -lpthread && ./calls
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
static CUcontext ctx;
static CUstream s1, s2;
static CUevent ev;
static int which, relaxed;
static CUresult got;
static const char *names[] = {"cuEventCreate", "cuEventRecord(s2)", "cuEventQuery", "cuEventSynchronize",
                              "cuEventDestroy", "cuStreamIsCapturing(s2)", "cuStreamQuery(s2)", "cuStreamSynchronize(s2)",
                              "cuEventRecord(legacy)", "cuCtxSynchronize"};
static void *B(void *p) {
  cuCtxSetCurrent(ctx);
  CUstreamCaptureMode m = relaxed ? CU_STREAM_CAPTURE_MODE_RELAXED : CU_STREAM_CAPTURE_MODE_GLOBAL;
  cuThreadExchangeStreamCaptureMode(&m);
  CUevent e2 = 0;
  CUstreamCaptureStatus st;
  switch (which) {
  case 0: got = cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING); if (!got) cuEventDestroy(e2); break;
  case 1: got = cuEventRecord(ev, s2); break;
  case 2: got = cuEventQuery(ev); break;
  case 3: got = cuEventSynchronize(ev); break;
  case 4: cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING); got = cuEventDestroy(e2); break;
  case 5: got = cuStreamIsCapturing(s2, &st); break;
  case 6: got = cuStreamQuery(s2); break;
  case 7: got = cuStreamSynchronize(s2); break;
  case 8: got = cuEventRecord(ev, CU_STREAM_LEGACY); break;
  case 9: got = cuCtxSynchronize(); break;
  }
  return 0;
}
int main(void) {
  CUdevice d;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d)) { printf("no GPU\n"); return 1; }
  cuCtxSetCurrent(ctx);
  cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
  cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
  cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
  CUdeviceptr buf;
  cuMemAlloc(&buf, 256);
  for (relaxed = 0; relaxed < 2; relaxed++) {
    for (which = 0; which < 10; which++) {
      cuEventRecord(ev, s2);
      cuStreamSynchronize(s2);
      CUresult b = cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL);
      cuMemsetD32Async(buf, 1, 64, s1);
      pthread_t t;
      pthread_create(&t, 0, B, 0);
      pthread_join(t, 0);
      CUresult after = cuMemsetD32Async(buf, 2, 64, s1);
      CUgraph g = 0;
      CUresult end = cuStreamEndCapture(s1, &g);
      if (g) cuGraphDestroy(g);
      printf("B %-8s %-26s -> %3d   begin %d, work after %3d, end %3d%s\n", relaxed ? "relaxed" : "global", names[which], got, b, after, end,
             end ? "   INVALIDATED" : "");
    }
  }
  return 0;
}
