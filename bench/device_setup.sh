#!/usr/bin/env bash
# Source this first in every command on the device machine (see ../shared/device/prepare):
#   source bench/device_setup.sh && python3 -m pytest -m gpu ...
# It installs the wheels the GPU machine lacks (xdsl, filecheck, lit) and fusec itself,
# keeps kernel caches out of the home folder and makes Python's output unbuffered.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl || return 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 FUSEC_CACHE_DIR=/tmp/fusec_cache
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || return 1
# Bytecode ahead, as a pip install writes it (--no-compile above saves the install's time): else a first call
# measured here compiles xdsl's and fusec's sources to bytecode (0.86 s of GPT-2's profiled first call), which
# no installed fusec pays and torch's modules, Inductor's, never do.
python3 -m compileall -q -j 0 /tmp/site fusec passes dialects lowering tools >/dev/null || return 1
python3 -c 'import torch, triton; print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)'
