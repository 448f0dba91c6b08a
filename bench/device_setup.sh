#!/usr/bin/env bash
# Source this first in every command on the device machine (see ../shared/device/prepare):
#   source bench/device_setup.sh && python3 -m pytest -m gpu ...
# It installs the wheels the GPU machine lacks (xdsl, filecheck, lit) and fusec itself,
# keeps kernel caches out of the home folder and makes Python's output unbuffered.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device-wheels/*.whl || return 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 FUSEC_CACHE_DIR=/tmp/fusec_cache
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || return 1
python3 -c 'import torch, triton; print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)'
