#!/usr/bin/env bash
# gpu-ab.sh: compare the speed of two trees on a GPU machine. It builds,
# with CGO_ENABLED=0, driver's and graph's test binaries of a base revision
# and of the working tree into .gpu/ab/ (gzipped, so that the folder fits a
# device call's carry on its own), and writes .gpu/ab/run.sh, which runs
# BenchmarkVersusC (driver) and BenchmarkGraphVersusC (graph) of both in
# alternating processes and prints, per variant, the median over processes
# of each side's "-xC" (its median ratio to C in the same process) and the
# change. The same code moves by about 1% between processes
# (CONTRIBUTING.md): compare several processes a side, never one.
#
#   bash tests/gpu-ab.sh d41a515        # base revision: any git revision
#
# On the GPU machine, from the repository root (python3 prints the table):
#
#   bash .gpu/ab/run.sh                              # 3 processes a side, both packages
#   AB_RUNS=8 AB_DRIVER=Launch4Args AB_GRAPH=0 bash .gpu/ab/run.sh
#
# AB_RUNS: processes a side (3); AB_DRIVER: a driver group's name prefix
# (PURECUDA_VERSUS; all groups when empty); AB_ROUNDS: ROUNDSxCALLS for the
# driver groups (41x4000); AB_GRAPH=0 / AB_DRIVER_OFF=1 leave a package out.
# Logs go to $OUT (or .gpu/ab/logs): ab.log, and the table in ab.txt; it
# exits 1 when a benchmark failed.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 1 ] || { echo "usage: bash tests/gpu-ab.sh BASE_REVISION" >&2; exit 2; }
base=$(git rev-parse --verify "$1^{commit}")
out=.gpu/ab
rm -rf "$out" && mkdir -p "$out"
tmp=$(mktemp -d)
cleanup() { git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
git worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
export CGO_ENABLED=0 GOOS=linux GOARCH="${GOARCH:-amd64}"
for side in base new; do
  src=.
  [ "$side" = base ] && src=$tmp/base
  for pkg in driver graph; do
    (cd "$src" && go test -c -ldflags='-s -w' -o "$OLDPWD/$out/$side-$pkg.test" "./$pkg")
    gzip -f "$out/$side-$pkg.test"
  done
done
cat >"$out/summary.py" <<'PY'
# summary.py LOG: per "-xC" metric, the median over processes of each side
# and the change; LOG has "== PKG SIDE N" headers before each process's
# benchmark output.
import collections, statistics, sys
vals = collections.defaultdict(list)
cur = None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        cur = line.split()[2]
        continue
    if line.startswith("Benchmark") and cur:
        t = line.split()
        for i in range(4, len(t) - 1, 2):
            if t[i + 1].endswith("-xC"):
                vals[(t[i + 1][:-3], cur)].append(float(t[i]))
# Beside the median, the lower quartile and the fastest process: some
# benchmarks are bimodal between processes, and the median moves with the
# mix of modes (CONTRIBUTING.md).
def q1(v):
    v = sorted(v)
    return v[(len(v) - 1) // 4]
names = sorted({k[0] for k in vals})
print(f"{'variant':34s} {'base':>7s} {'new':>7s} {'change':>7s}  {'q1 change':>9s} {'min change':>10s}  processes")
for n in names:
    b, w = vals.get((n, "base"), []), vals.get((n, "new"), [])
    if not b or not w:
        continue
    ch = lambda x, y: f"{100 * (y - x) / x:+6.1f}%"
    mb, mw = statistics.median(b), statistics.median(w)
    print(f"{n:34s} {mb:7.3f} {mw:7.3f} {ch(mb, mw)}  {ch(q1(b), q1(w)):>9s} {ch(min(b), min(w)):>10s}  {len(b)}/{len(w)}")
PY
cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Written by tests/gpu-ab.sh: alternating processes of the base and new
# test binaries, then the table.
root=$(cd "$(dirname "$0")/../.." && pwd); cd "$root"
ab=$root/.gpu/ab; out=${OUT:-$ab/logs}; mkdir -p "$out"; bin=$(mktemp -d)
for f in "$ab"/*.test.gz; do n=$(basename "$f" .gz); gunzip -c "$f" >"$bin/$n"; chmod +x "$bin/$n"; done
export PURECUDA_REQUIRE_GPU=1 PURECUDA_VERSUS="${AB_DRIVER:-}" PURECUDA_VERSUS_ROUNDS="${AB_ROUNDS:-41x4000}"
log=$out/ab.log; : >"$log"
for i in $(seq "${AB_RUNS:-3}"); do
  for side in base new; do
    if [ -z "${AB_DRIVER_OFF:-}" ]; then
      echo "== driver $side $i" >>"$log"
      (cd driver && "$bin/$side-driver.test" -test.run '^$' -test.bench 'VersusC$' -test.benchtime 1x) >>"$log" 2>&1
    fi
    if [ "${AB_GRAPH:-1}" != 0 ]; then
      echo "== graph $side $i" >>"$log"
      (cd graph && "$bin/$side-graph.test" -test.run '^$' -test.bench 'GraphVersusC$' -test.benchtime 1x) >>"$log" 2>&1
    fi
  done
  echo "round $i done"
done
python3 "$ab/summary.py" "$log" | tee "$out/ab.txt"
rm -rf "$bin"
if grep -qE -- '^(--- FAIL|FAIL|panic:)' "$log"; then
  grep -E -A3 -- '^(--- FAIL|panic:)' "$log" | head -20
  exit 1
fi
RUN
chmod +x "$out/run.sh"
echo "built base ($(git rev-parse --short "$base")) and new driver and graph test binaries into $out/ ($(du -sh "$out" | cut -f1)); run: bash $out/run.sh"
