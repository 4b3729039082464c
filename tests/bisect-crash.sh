#!/usr/bin/env bash
# bisect-crash.sh: which earlier tests of one test binary make a later test
# crash the process? It runs TARGET after subsets of the tests listed
# before it (in the binary's order), halving the set while TARGET still
# crashes (a "SIGSEGV" in the output), and prints the smallest set found.
# Made for the graph suite's stress crash (issue 28), which came only
# after the rest of the suite; it runs on the GPU machine, from the
# package's directory, with a binary built by tests/gpu-bundle.sh:
#
#   cd graph && bash ../tests/bisect-crash.sh ../.gpu/graph.test TestGPUGraphStressCloseRaces [TRIES]
#
# TRIES (1 by default) is how many times a subset is run before it counts
# as not crashing. Extra flags for the binary go in BISECT_FLAGS; the
# environment passes through (PURECUDA_STRESS_DURATION shortens the stress).
set -uo pipefail
bin=$1 target=$2 tries=${3:-1}
mapfile -t all < <("$bin" -test.list '.*' | grep -v '^ok\b')
before=()
for t in "${all[@]}"; do
  [ "$t" = "$target" ] && break
  before+=("$t")
done
[ ${#before[@]} = ${#all[@]} ] && { echo "bisect: $target is not among the tests" >&2; exit 2; }

# crashes SET...: whether TARGET crashes after SET, within tries runs.
crashes() {
  local re
  re="^($(IFS='|'; echo "$*${*:+|}$target"))\$"
  for ((i = 0; i < tries; i++)); do
    if timeout 300 "$bin" -test.count=1 -test.run "$re" ${BISECT_FLAGS:-} >/tmp/bisect.out 2>&1; then
      continue
    fi
    if grep -q SIGSEGV /tmp/bisect.out; then
      return 0
    fi
  done
  return 1
}

set_=("${before[@]}")
echo "bisect: ${#set_[@]} tests before $target"
if ! crashes "${set_[@]}"; then
  echo "bisect: no crash with every earlier test: nothing to narrow"
  exit 1
fi
if crashes; then
  echo "bisect: $target crashes on its own"
  exit 0
fi
while [ ${#set_[@]} -gt 1 ]; do
  half=$((${#set_[@]} / 2))
  first=("${set_[@]:0:half}") second=("${set_[@]:half}")
  if crashes "${first[@]}"; then
    set_=("${first[@]}")
  elif crashes "${second[@]}"; then
    set_=("${second[@]}")
  else
    echo "bisect: needs tests of both halves; stopping at ${#set_[@]} tests"
    break
  fi
  echo "bisect: ${#set_[@]} tests left: ${set_[*]:0:8}$([ ${#set_[@]} -gt 8 ] && echo ' ...')"
done
echo "bisect: $target crashes after: ${set_[*]}"
