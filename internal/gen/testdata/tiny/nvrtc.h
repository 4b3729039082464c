/* A tiny stand-in for nvrtc.h. */
typedef enum {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_COMPILATION = 6
} nvrtcResult;
const char *nvrtcGetErrorString(nvrtcResult result);
typedef struct _nvrtcProgram *nvrtcProgram;
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog,
                               const char *src,
                               int numHeaders,
                               const char * const *headers);
