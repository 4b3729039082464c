#!/usr/bin/env bash
# bisect-parallel.sh: bisect-crash.sh's question (which earlier tests of a
# test binary make TARGET crash the process) answered in two parallel
# rounds instead of a chain of halvings, for a GPU call that has little
# time. The tests listed before TARGET are cut into CHUNKS pieces; round 1
# runs, all at once, TARGET after each piece alone and after each prefix
# of pieces; round 2 runs TARGET after each test of the first piece that
# crashed alone, JOBS at a time. A run counts as crashed when its output
# says SIGSEGV. From the package's directory, on the GPU machine:
#
#   cd graph && bash ../tests/bisect-parallel.sh ../.gpu/graph.test TestGPUGraphStressCloseRaces [CHUNKS] [JOBS]
#
# Outputs go to $OUT/bisect (or /tmp/bisect); extra flags in BISECT_FLAGS.
set -uo pipefail
bin=$1 target=$2 chunks=${3:-8} jobs=${4:-12}
dir=${OUT:-/tmp}/bisect; mkdir -p "$dir"
mapfile -t all < <("$bin" -test.list '.*' | grep -v '^ok\b')
before=()
for t in "${all[@]}"; do
  [ "$t" = "$target" ] && break
  before+=("$t")
done
[ ${#before[@]} = ${#all[@]} ] && { echo "bisect: $target is not among the tests" >&2; exit 2; }
n=${#before[@]} per=$(( (${#before[@]} + chunks - 1) / chunks ))
echo "bisect: $n tests before $target, $chunks pieces of $per"

# run NAME TESTS...: TARGET after TESTS, in the background, output in $dir/NAME.
run() {
  local name=$1; shift
  local re="^($(IFS='|'; echo "$*${*:+|}$target"))\$"
  ( timeout 300 "$bin" -test.count=1 -test.run "$re" ${BISECT_FLAGS:-} >"$dir/$name" 2>&1; echo "rc=$?" >>"$dir/$name" ) &
}
crashed() { grep -q SIGSEGV "$dir/$1"; }

run alone
for ((k = 0; k < chunks; k++)); do
  piece=("${before[@]:k*per:per}")
  [ ${#piece[@]} = 0 ] && break
  run "piece$k" "${piece[@]}"
  run "prefix$k" "${before[@]:0:(k+1)*per}"
done
wait
echo -n "round 1: alone $(crashed alone && echo CRASH || echo ok);"
first=-1
for ((k = 0; k < chunks; k++)); do
  [ -e "$dir/piece$k" ] || break
  p=$(crashed "piece$k" && echo CRASH || echo ok) q=$(crashed "prefix$k" && echo CRASH || echo ok)
  echo -n " piece$k $p prefix$k $q;"
  [ "$p" = CRASH ] && [ $first = -1 ] && first=$k
done
echo
[ $first = -1 ] && { echo "bisect: no piece crashes alone (see the prefixes)"; exit 1; }
piece=("${before[@]:first*per:per}")
echo "round 2: the ${#piece[@]} tests of piece$first: ${piece[*]}"
i=0
for t in "${piece[@]}"; do
  run "test-$t" "$t"
  i=$((i + 1)); (( i % jobs == 0 )) && wait
done
wait
for t in "${piece[@]}"; do
  crashed "test-$t" && echo "bisect: $target crashes after $t alone"
done
echo "bisect: done"
