#!/usr/bin/env bash
# gpu-bundle.sh: cross-build, with CGO_ENABLED=0, a test binary for every
# package that has GPU tests (its tests use internal/gputest or
# PURECUDA_REQUIRE_GPU), plus cmd/smoke and every program under examples/,
# into .gpu/, and write .gpu/run.sh, which runs them on a machine that has a
# GPU but no Go. The binaries are gzipped (they outgrew a device call's
# 64 MiB carry); run.sh unpacks them first.
#
#   bash tests/gpu-bundle.sh            # build for linux/amd64
#   GOARCH=arm64 bash tests/gpu-bundle.sh
#
# On the GPU machine, from the repository root:
#
#   PURECUDA_REQUIRE_GPU=1 bash .gpu/run.sh                 # all tests, -test.v
#   PURECUDA_BENCH=1 ... bash .gpu/run.sh                    # and benchmarks (-benchmem)
#   PURECUDA_MEMCHECK="internal_cu driver" ... bash .gpu/run.sh  # and compute-sanitizer on those
#     (PURECUDA_MEMCHECK_RE / PURECUDA_MEMCHECK_SKIP choose the tests run under it,
#     PURECUDA_MEMCHECK_ARGS adds flags, e.g. -test.short)
#   PURECUDA_TEST_TIMEOUT=3m ... bash .gpu/run.sh          # each test binary's -test.timeout (9m)
#
# Logs go to $OUT (or .gpu/logs): smoke.log (smoke's text report), smoke.json
# (smoke -json), examples.log, tests.log, and bench.log / memcheck.log when
# asked for. smoke, smoke -json and each example count as one test each; the
# last line is "N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0 GOOS=linux GOARCH="${GOARCH:-amd64}"
rm -rf .gpu && mkdir -p .gpu
mod=$(go list -m)
entries=()
for d in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...); do
  grep -qlE 'gputest\.|PURECUDA_REQUIRE_GPU' "$d"/*_test.go || continue
  rel=$(go list -f '{{.ImportPath}}' "$d"); rel=${rel#"$mod"}; rel=${rel#/}; [ -n "$rel" ] || rel=.
  # CPU-only suites (the fake driver) and the examples' own tests (the
  # examples run as programs below) stay out: the bundle must stay small.
  case "$rel" in tests/fakedriver|examples/*) continue ;; esac
  name=$(echo "$rel" | tr '/.' '__')
  go test -c -ldflags='-s -w' -o ".gpu/$name.test" "./$rel"
  entries+=("$name:$rel")
done
go build -ldflags='-s -w' -o .gpu/smoke ./cmd/smoke
examples=()
for d in examples/*/; do
  [ -e "$d/main.go" ] || continue
  name=$(basename "$d")
  go build -ldflags='-s -w' -o ".gpu/example-$name" "./$d"
  examples+=("$name")
done
cp tests/cbench/cbench.c tests/cbench/ncclbench.c tests/cbench/torch_allreduce.py tests/cbench/torch_matmul.py .gpu/

{
  echo '#!/usr/bin/env bash'
  echo '# Written by tests/gpu-bundle.sh: runs the bundled test binaries.'
  echo 'root=$(cd "$(dirname "$0")/.." && pwd); cd "$root"'
  echo '# The binaries travel gzipped (a device call carries at most 64 MiB).'
  echo 'for f in .gpu/*.gz; do [ -e "$f" ] || continue; gunzip -f "$f" && chmod +x "${f%.gz}"; done'
  echo 'logs=$root/.gpu/logs; out=${OUT:-$logs}; mkdir -p "$logs" "$out"'
  echo "entries=(${entries[*]})"
  echo "examples=(${examples[*]})"
  cat <<'RUN'
passed=0; failed=0; skipped=0; bad=()
echo "== smoke"; ./.gpu/smoke 2>&1 | tee "$out/smoke.log"; s=${PIPESTATUS[0]}
if [ "$s" = 0 ]; then passed=$((passed+1)); else failed=$((failed+1)); bad+=(smoke); fi
echo "== smoke -json"; ./.gpu/smoke -json >"$out/smoke.json" 2>"$logs/smoke-json.err"; s=$?
cat "$logs/smoke-json.err"
if [ "$s" = 0 ] && grep -q '"result": "PASS"' "$out/smoke.json"; then
  passed=$((passed+1)); echo "   PASS, report in $out/smoke.json"
else
  failed=$((failed+1)); bad+=(smoke-json); echo "   exit $s"; head -40 "$out/smoke.json"
fi
rm -f "$out/tests.log" "$out/bench.log" "$out/memcheck.log" "$out/examples.log"
for name in "${examples[@]}"; do
  echo "== example $name"
  ./.gpu/example-"$name" >"$logs/example-$name.log" 2>&1; s=$?
  cat "$logs/example-$name.log"; { echo "=== $name (exit $s)"; cat "$logs/example-$name.log"; } >>"$out/examples.log"
  if [ "$s" = 0 ]; then passed=$((passed+1)); else failed=$((failed+1)); bad+=("example-$name"); echo "   exit $s"; fi
done
for e in "${entries[@]}"; do
  name=${e%%:*}; dir=${e#*:}
  echo "== $name ($dir)"
  (cd "$dir" && "$root/.gpu/$name.test" -test.v -test.count=1 -test.timeout="${PURECUDA_TEST_TIMEOUT:-9m}") >"$logs/$name.log" 2>&1; s=$?
  { echo "=== $name"; cat "$logs/$name.log"; } >>"$out/tests.log"
  p=$(grep -c -- '^\s*--- PASS' "$logs/$name.log"); f=$(grep -c -- '^\s*--- FAIL' "$logs/$name.log"); k=$(grep -c -- '^\s*--- SKIP' "$logs/$name.log")
  passed=$((passed+p)); failed=$((failed+f)); skipped=$((skipped+k))
  echo "   $p passed, $f failed, $k skipped (exit $s)"
  grep -E -A3 -- '^\s*--- (FAIL|SKIP)' "$logs/$name.log" | head -40
  if [ "$s" != 0 ]; then bad+=("$name"); [ "$f" = 0 ] && failed=$((failed+1)) && tail -30 "$logs/$name.log"; fi
  # A crash: the test that was running and the start of the dump (the
  # goroutine in C and those in CUDA calls), which tail misses.
  if grep -qE '^(SIGSEGV|SIGABRT|SIGBUS|fatal error|panic:)' "$logs/$name.log"; then
    grep -E '^=== RUN' "$logs/$name.log" | tail -3
    grep -m1 -A40 -E '^(SIGSEGV|SIGABRT|SIGBUS|fatal error|panic:)' "$logs/$name.log"
    grep -B1 -A12 -E '^goroutine .*\[syscall' "$logs/$name.log" | grep -E '^goroutine|internal/cu\.|graph_ops|_test\.go' | head -40
  fi
done
if [ -n "${PURECUDA_BENCH:-}" ]; then
  for e in "${entries[@]}"; do
    name=${e%%:*}; dir=${e#*:}
    grep -aq '_test\.Benchmark' "$root/.gpu/$name.test" || continue
    echo "== bench $name"
    (cd "$dir" && "$root/.gpu/$name.test" -test.run '^$' -test.bench "${PURECUDA_BENCH_RE:-.}" -test.benchmem -test.benchtime="${PURECUDA_BENCHTIME:-1s}" -test.count="${PURECUDA_BENCHCOUNT:-1}") 2>&1 | tee -a "$out/bench.log" | grep -E '^(Benchmark|ok|FAIL|---)'
  done
  inc=/usr/local/cuda/include; libdir=$(dirname "$(ldconfig -p | grep -m1 'libcuda.so ' | awk '{print $NF}')" 2>/dev/null)
  [ -e /usr/local/nvidia/lib64/libcuda.so ] && libdir=/usr/local/nvidia/lib64
  if command -v gcc >/dev/null && [ -e "$inc/cuda.h" ]; then
    echo "== C baseline"
    gcc -O2 -I"$inc" .gpu/cbench.c -o .gpu/cbench -L"$libdir" -lcuda -Wl,-rpath,"$libdir" && ./.gpu/cbench "${PURECUDA_CBENCH_REPS:-2}" 2>&1 | tee -a "$out/bench.log"
    echo "== C baseline, NCCL"
    gcc -O2 -I"$inc" .gpu/ncclbench.c -o .gpu/ncclbench -L"$libdir" -lcuda -ldl -Wl,-rpath,"$libdir" && ./.gpu/ncclbench "${PURECUDA_CBENCH_REPS:-2}" 2>&1 | tee -a "$out/bench.log"
  fi
  if python3 -c 'import torch' 2>/dev/null; then
    echo "== PyTorch all-reduce"
    python3 .gpu/torch_allreduce.py "${PURECUDA_CBENCH_REPS:-2}" 2>&1 | tee -a "$out/bench.log"
    echo "== PyTorch matmul"
    python3 .gpu/torch_matmul.py "${PURECUDA_CBENCH_REPS:-2}" 2>&1 | tee -a "$out/bench.log"
  fi
fi
for name in ${PURECUDA_MEMCHECK:-}; do
  dir=$(for e in "${entries[@]}"; do [ "${e%%:*}" = "$name" ] && echo "${e#*:}"; done)
  echo "== compute-sanitizer memcheck $name"
  (cd "$dir" && compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 3 "$root/.gpu/$name.test" -test.count=1 -test.run "${PURECUDA_MEMCHECK_RE:-.}" -test.skip "${PURECUDA_MEMCHECK_SKIP:-^$}" ${PURECUDA_MEMCHECK_ARGS:-}) >"$logs/memcheck-$name.log" 2>&1; s=$?
  tail -5 "$logs/memcheck-$name.log"
  grep -E -B3 -A25 -- '--- FAIL' "$logs/memcheck-$name.log" | head -60
  cat "$logs/memcheck-$name.log" >>"$out/memcheck.log"
  if [ "$s" != 0 ]; then failed=$((failed+1)); bad+=("memcheck-$name"); fi
done
echo "failed: ${bad[*]:-none}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
RUN
} > .gpu/run.sh
chmod +x .gpu/run.sh
n=$(ls .gpu/*.test | wc -l)
gzip -f .gpu/*.test .gpu/smoke .gpu/example-*
echo "built $n test binaries, smoke and ${#examples[@]} examples (${examples[*]}) into .gpu/ for $GOOS/$GOARCH"
