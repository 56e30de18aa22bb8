#!/bin/bash
# The real-GPU check, as one device run: install what the machine's image lacks, then
# benchmarks/gpu_check.py's table, benchmarks/gpu_probe.py's profile and copy probe, and
# the GPU test set (`make print-gpu-tests`) on the real device (no stand-in).
#
# Made for the workplace's H200/H100 machines (Python 3.12 with CuPy, NumPy, pytest-xdist,
# pytest-timeout; no network): fetch the missing wheels here first, into the ignored .whl/:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl protobuf==7.36.2 google-crc32c==1.9.0 simplejpeg==1.9.0 orjson==3.13.0 \
#     pytest-asyncio==1.5.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 imagecodecs==2026.3.6
# then run `bash tools/gpu_device_run.sh [all|check|probe|tests|probetests]` there with .whl
# carried; results land in $OUT (check.txt, probe.txt, tests.txt: one line per test, so a
# run cut short still names its failures).  On any machine with CuPy, `make test-gpu` is
# the committed equivalent of `check` + `tests`.
#
# Measured 2026-11-30 on an H200 (16 cores): the test set with 12 xdist workers ran ~89%
# of its ~5,300 tests in 270 s (cold CuPy kernel cache: every kernel compiles once).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
nvidia-smi -L 2>&1 | tee $OUT/smi.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a $OUT/smi.txt
[ -n "${SKIP_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || { echo WHEELS FAILED; exit 3; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
if ! python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >$OUT/install.log 2>&1 \
   || ! python3 -c "import asyncflow.ops, asyncflow.devices.gpu"; then
  echo "editable install failed; symlinks instead"; tail -5 $OUT/install.log
  ln -sfn ../ops asyncflow/ops; ln -sfn ../devices asyncflow/devices
  export PYTHONPATH=$PYTHONPATH:$PWD
fi
python3 -c "import cupy, numpy, google.protobuf, asyncflow as af; from asyncflow.devices import gpu; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'protobuf', google.protobuf.__version__, 'backend', gpu.backend(), gpu.unavailable_reason())" 2>&1 | tee $OUT/versions.txt
what=${1:-all}
if [ "$what" = all ] || [ "$what" = check ]; then
  timeout ${CHECK_S:-180} python3 benchmarks/gpu_check.py --steps 50 2>&1 | tee $OUT/check.txt
fi
if [ "$what" = all ] || [ "$what" = probe ] || [ "$what" = probetests ]; then
  timeout ${PROBE_S:-60} python3 benchmarks/gpu_probe.py --steps 100 > $OUT/probe.txt 2>&1; tail -12 $OUT/probe.txt
fi
if [ "$what" = all ] || [ "$what" = tests ] || [ "$what" = probetests ]; then
  T=${GPU_T:-$(make -s print-gpu-tests)}
  PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout ${TESTS_S:-240} python3 -m pytest -p no:cacheprovider \
    -p pytest_asyncio.plugin -p pytest_timeout -p xdist.plugin -n ${NPROC:-12} -vv -rfE \
    --timeout 60 $T ${EXTRA:-} > $OUT/tests.txt 2>&1
  echo "pytest rc=$?"
  grep -E "passed|failed" $OUT/tests.txt | tail -3
  grep -E " (FAILED|ERROR) " $OUT/tests.txt | head -60; grep -c PASSED $OUT/tests.txt
fi
